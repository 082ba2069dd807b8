#!/usr/bin/env node
// Type-checks Grafana dashboards (JSON) against Grafana's TypeScript types of the pinned
// @grafana/grafana-foundation-sdk build, in TypeScript's strict mode (tsconfig.json), and refuses
// colours that only Grafana itself can resolve.
//
//   node check.mjs                 every dashboards/*.json
//   node check.mjs FILE.json ...   these files
//
// Each dashboard becomes, in memory, the module
//   import ...; export const dashboard: Dashboard<SdkPanel> = <the JSON text>;
// with the declaration on the JSON's first line, so a diagnostic's line and column are the JSON
// file's. TypeScript checks an object literal for unknown properties at every depth where the
// target type is known, and `SdkPanel` (written below from the SDK itself: one PanelOf<...> per
// panel plugin, keyed by the plugin id its panel builder sets) types each panel's options and
// custom field config by its plugin. Exit status 1 on any error.

import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SDK = "@grafana/grafana-foundation-sdk";
const require = createRequire(import.meta.url);

// --- the SDK's panel plugins ----------------------------------------------------------------------

/** Every panel plugin the SDK has: its module, the plugin id (what a panel's `type` says) and
 * whether the module declares Options and a FieldConfig of its own. */
function sdkPanelPlugins() {
  const pkg = JSON.parse(fs.readFileSync(path.join(HERE, "node_modules", SDK, "package.json"), "utf8"));
  const plugins = [];
  for (const subpath of Object.keys(pkg.exports)) {
    const name = subpath.replace(/^\.\//, "");
    const mod = require(`${SDK}/${name}`);
    if (typeof mod.PanelBuilder !== "function") continue;
    // The builder of a plugin's panel sets its `type`; dashboard's generic PanelBuilder sets none.
    const type = new mod.PanelBuilder().build().type;
    if (!type) continue;
    plugins.push({
      name,
      type,
      options: typeof mod.defaultOptions === "function",
      fieldConfig: typeof mod.defaultFieldConfig === "function",
    });
  }
  return { version: pkg.version, plugins };
}

function panelsModule(plugins) {
  const lines = ['import type { PanelOf } from "./types";'];
  for (const p of plugins) lines.push(`import type * as m_${p.name} from "${SDK}/${p.name}";`);
  lines.push("export type SdkPanel =");
  for (const p of plugins) {
    const options = p.options ? `m_${p.name}.Options` : "never";
    const custom = p.fieldConfig ? `, m_${p.name}.FieldConfig` : "";
    lines.push(`  | PanelOf<${JSON.stringify(p.type)}, ${options}${custom}>`);
  }
  return lines.join("\n") + ";\n";
}

// --- colours --------------------------------------------------------------------------------------

// Grafana resolves a colour name through its theme (grafana/grafana
// packages/grafana-data/src/themes/createVisualizationColors.ts, getColorByName): six hues (red,
// orange, yellow, green, blue, purple) in five shades each (super-light-, light-, plain, semi-dark-,
// dark-), and three special names read from the theme at draw time, `text` (the theme's primary
// text colour), `panel-bg` and `transparent`, which a renderer without Grafana's theme cannot know
// ("unknown hex color: text"). Only the palette names and explicit colours are accepted here.
const HUES = ["red", "orange", "yellow", "green", "blue", "purple"];
const SHADES = ["super-light-", "light-", "", "semi-dark-", "dark-"];
const PALETTE = new Set(HUES.flatMap((hue) => SHADES.map((shade) => shade + hue)));
const HEX = /^#[0-9a-fA-F]{6}(?:[0-9a-fA-F]{2})?$/;
const RGB = /^rgb\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$/;
const RGBA = /^rgba\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(0|1|0?\.\d+|1\.0+)\s*\)$/;
const COLOUR_KEY = /colou?r$/i;

function isColour(value) {
  if (PALETTE.has(value) || HEX.test(value)) return true;
  const rgb = RGB.exec(value) ?? RGBA.exec(value);
  return rgb !== null && [rgb[1], rgb[2], rgb[3]].every((c) => Number(c) <= 255);
}

const COLOUR_HELP =
  "use #rrggbb, #rrggbbaa, rgb(r, g, b), rgba(r, g, b, a) or a Grafana palette name " +
  `(${HUES.join(", ")}, each also light-, super-light-, semi-dark-, dark-)`;

function propertyName(node) {
  return node.name && (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name)) ? node.name.text : undefined;
}

function stringProperty(object, key) {
  for (const p of object.properties) {
    if (ts.isPropertyAssignment(p) && propertyName(p) === key && ts.isStringLiteral(p.initializer)) {
      return p.initializer.text;
    }
  }
  return undefined;
}

/** Every string in a colour's place: a key ending in "color" (color, fixedColor, iconColor,
 * lineColor …), an override value whose id names a colour ("custom.lineColor"), and a heatmap's
 * `color.fill` (empty there is the SDK's default: unset). */
function colourErrors(source, literal) {
  const found = [];
  const visit = (node) => {
    if (ts.isPropertyAssignment(node) && ts.isStringLiteral(node.initializer)) {
      const key = propertyName(node);
      const value = node.initializer.text;
      const parentKey = ts.isPropertyAssignment(node.parent.parent) ? propertyName(node.parent.parent) : undefined;
      const overrideId = key === "value" ? stringProperty(node.parent, "id") : undefined;
      const heatmapFill = key === "fill" && parentKey === "color";
      const colourPlace =
        COLOUR_KEY.test(key ?? "") || (overrideId !== undefined && COLOUR_KEY.test(overrideId)) || heatmapFill;
      if (colourPlace && !(heatmapFill && value === "") && !isColour(value)) {
        found.push({
          start: node.initializer.getStart(source),
          code: "colour",
          message: `${JSON.stringify(value)} is not a colour every renderer knows: ${COLOUR_HELP}.`,
        });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(literal);
  return found;
}

// --- where in the JSON ----------------------------------------------------------------------------

/** The JSON path of the innermost property or element at `pos` (panels[3].options.legend.bogus),
 * and the title of the panel it is in. */
function jsonPathAt(source, literal, pos) {
  const parts = [];
  let panel;
  let node = literal;
  for (;;) {
    const child = node
      .getChildren(source)
      .flatMap((c) => (c.kind === ts.SyntaxKind.SyntaxList ? c.getChildren(source) : [c]))
      .find((c) => c.getStart(source) <= pos && pos < c.getEnd());
    if (!child) break;
    if (ts.isPropertyAssignment(child)) parts.push(`.${propertyName(child)}`);
    if (ts.isArrayLiteralExpression(node)) {
      parts.push(`[${node.elements.indexOf(child)}]`);
      const owner = ts.isPropertyAssignment(node.parent) ? propertyName(node.parent) : undefined;
      if (owner === "panels" && ts.isObjectLiteralExpression(child)) panel = stringProperty(child, "title");
    }
    node = child;
  }
  return { path: parts.join("").replace(/^\./, "") || "(top)", panel };
}

// --- the check ------------------------------------------------------------------------------------

function dashboardModule(jsonText) {
  // The declaration goes before the JSON's opening brace, on its line: lines stay the JSON's.
  return (
    'import type { Dashboard } from "./types"; import type { SdkPanel } from "./__panels.gen"; ' +
    "export const dashboard: Dashboard<SdkPanel> = " +
    jsonText.trimEnd() +
    ";\n"
  );
}

function compilerOptions() {
  const file = path.join(HERE, "tsconfig.json");
  const config = ts.readConfigFile(file, ts.sys.readFile);
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, "\n"));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, HERE, undefined, file);
  if (!parsed.options.strict) throw new Error("tsconfig.json: the check needs strict: true");
  return { options: parsed.options, rootNames: parsed.fileNames };
}

function main(args) {
  const inputs = args.length
    ? args
    : fs.readdirSync(path.join(HERE, ".."))
        .filter((f) => f.endsWith(".json"))
        .sort()
        .map((f) => path.relative(process.cwd(), path.join(HERE, "..", f)));
  const { version, plugins } = sdkPanelPlugins();
  const virtual = new Map([[path.join(HERE, "__panels.gen.ts"), panelsModule(plugins)]]);
  const boards = [];
  const errors = [];
  inputs.forEach((input, i) => {
    const text = fs.readFileSync(input, "utf8");
    try {
      if (typeof JSON.parse(text) !== "object") throw new Error("not a JSON object");
    } catch (err) {
      errors.push(`${input}: error json: ${err.message}`);
      return;
    }
    const file = path.join(HERE, `__dashboard_${i}.ts`);
    virtual.set(file, dashboardModule(text));
    boards.push({ input, file });
  });

  const { options, rootNames } = compilerOptions();
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (f) => virtual.has(f) || fileExists.call(host, f);
  host.readFile = (f) => virtual.get(f) ?? readFile.call(host, f);
  host.getSourceFile = (f, lang, ...rest) =>
    virtual.has(f) ? ts.createSourceFile(f, virtual.get(f), lang, true) : getSourceFile.call(host, f, lang, ...rest);
  const program = ts.createProgram([...rootNames, ...virtual.keys()], options, host);

  const byFile = new Map(boards.map((b) => [b.file, b]));
  const literalOf = (source) => {
    const decl = source.statements.find(ts.isVariableStatement).declarationList.declarations[0];
    return decl.initializer;
  };
  const report = (where, source, literal, start, code, message) => {
    const { line, character } = source.getLineAndCharacterOfPosition(start);
    const at = jsonPathAt(source, literal, start);
    const panel = at.panel === undefined ? "" : ` (panel ${JSON.stringify(at.panel)})`;
    errors.push(`${where}:${line + 1}:${character + 1}: error ${code}: at ${at.path}${panel}: ${message}`);
  };

  for (const d of ts.getPreEmitDiagnostics(program)) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, "\n    ");
    const board = d.file && byFile.get(d.file.fileName);
    if (board) {
      report(board.input, d.file, literalOf(d.file), d.start ?? 0, `TS${d.code}`, message);
    } else if (d.file) {
      const { line, character } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
      const where = path.relative(process.cwd(), d.file.fileName);
      errors.push(`${where}:${line + 1}:${character + 1}: error TS${d.code}: ${message}`);
    } else {
      errors.push(`error TS${d.code}: ${message}`);
    }
  }
  for (const board of boards) {
    const source = program.getSourceFile(board.file);
    const literal = literalOf(source);
    for (const c of colourErrors(source, literal)) report(board.input, source, literal, c.start, c.code, c.message);
  }

  for (const e of errors) console.log(e);
  const what = `${inputs.length} dashboard(s) against ${SDK} ${version} (TypeScript ${ts.version}, strict)`;
  if (errors.length) {
    console.log(`${errors.length} error(s) in ${what}`);
    return 1;
  }
  console.log(`ok: ${what}, ${plugins.length} panel plugins`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
