// Grafana's dashboard types from the pinned @grafana/grafana-foundation-sdk build, reshaped to how a
// dashboard is written in JSON, so that an object literal of a generated dashboard can be checked
// against them with TypeScript's strict mode (check.mjs). Three things the SDK's own types leave
// open are closed here:
//   - enums: the SDK declares TypeScript enums, which JSON strings cannot satisfy; Json<T> turns
//     each enum into the union of its values ("dashboards" | "link"), so a wrong value is an error;
//   - a panel's `options`, `fieldConfig.defaults.custom` and override values are `any` in
//     dashboard.Panel: PanelOf<...> types them with the panel plugin's own Options and FieldConfig
//     (check.mjs makes one PanelOf per panel plugin of the SDK, keyed by the plugin id);
//   - `targets` are cog.Dataquery (anything): here they are Prometheus queries, the only data
//     source the dashboards use. Another data source needs its query type added to Query.
// Left open, as `any` in the SDK itself: a transformation's options, a field matcher's options and
// a query variable's query object (the SDK has no types for them).

import type * as dashboard from "@grafana/grafana-foundation-sdk/dashboard";
import type * as prometheus from "@grafana/grafana-foundation-sdk/prometheus";

type IsAny<T> = 0 extends 1 & T ? true : false;
type Method = (...args: never[]) => unknown;

/** T as JSON writes it: an enum as the union of its values, no methods, the rest unchanged. */
export type Json<T> =
  IsAny<T> extends true
    ? T
    : T extends string
      ? `${T}`
      : T extends number | boolean | null | undefined
        ? T
        : T extends Method
          ? never
          : T extends readonly (infer U)[]
            ? Json<U>[]
            : { [K in keyof T as T[K] extends Method ? never : K]: Json<T[K]> };

/** An intersection as one object type (readable error messages; optional keys stay optional). */
type Flat<T> = { [K in keyof T]: T[K] };

/** A panel query: the Prometheus data source's (every panel of the dashboards queries Prometheus). */
export type Query = Json<prometheus.dataquery>;

type FieldConfig = dashboard.FieldConfig;
type StandardKey = Exclude<keyof FieldConfig, "custom">;

/** An override property: `id` names a standard field option or `custom.<key>` of the panel
 * plugin's FieldConfig, and `value` has that option's type. */
type StandardProperty = {
  [K in StandardKey]-?: { id: K; value?: Json<FieldConfig[K]> };
}[StandardKey];
type CustomProperty<Custom> = [Custom] extends [never]
  ? never
  : { [K in keyof Custom & string]-?: { id: `custom.${K}`; value?: Json<Custom[K]> } }[keyof Custom & string];

/** No keys at all: `custom` of a panel plugin without its own FieldConfig. */
type Empty = Record<string, never>;

type Defaults<Custom> = Flat<
  Omit<Json<FieldConfig>, "custom"> & { custom?: [Custom] extends [never] ? Empty : Json<Custom> }
>;

type FieldConfigSource<Custom> = {
  defaults: Defaults<Custom>;
  overrides: {
    matcher: Json<dashboard.MatcherConfig>;
    properties: (StandardProperty | CustomProperty<Custom>)[];
  }[];
};

/** A panel of plugin `Type`: options and custom field config typed by that plugin (`never`: the
 * plugin has no FieldConfig of its own, so `custom` must be empty). */
export type PanelOf<Type extends string, Options, Custom = never> = Flat<
  Omit<Json<dashboard.Panel>, "type" | "options" | "fieldConfig" | "targets"> & {
    type: Type;
    options?: [Options] extends [never] ? Empty : Json<Options>;
    fieldConfig?: FieldConfigSource<Custom>;
    targets?: Query[];
  }
>;

/** A row holds panels of the same kinds as the dashboard. */
export type Row<Panel> = Flat<Omit<Json<dashboard.RowPanel>, "panels"> & { panels: Panel[] }>;

/** The dashboard with its panels typed by `Panel`: a union of PanelOf<...>, one per plugin. */
export type Dashboard<Panel> = Flat<Omit<Json<dashboard.Dashboard>, "panels"> & { panels?: (Panel | Row<Panel>)[] }>;
