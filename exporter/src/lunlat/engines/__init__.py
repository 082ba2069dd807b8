"""Database engines: one package each, found through `registry`.

An engine's package holds everything lunlat knows about that engine: its target in the config
(`config`), what it publishes (`metrics`), its SQL and the source that runs it (`sql`, `source`), and
an `ENGINE` (`engine.Engine`) that tells the rest of lunlat (config, contract, check-config, rules,
dashboards, report) what it needs. Nothing outside the package names the engine; adding one is its
package plus one line in `registry` (CONTRIBUTING.md, "Adding a source").
"""
