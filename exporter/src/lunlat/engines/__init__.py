"""Database engines: one package each, found through `registry`.

An engine's package holds everything lunlat knows about that engine: its target in the config
(`config`), what it publishes (`metrics`), its SQL and the source that runs it (`sql`, `source`), and
an `ENGINE` (`engine.Engine`): data naming its target type and its source class, which tells the
rest of lunlat (config, contract, check-config, rules, dashboards, report) what it needs. Nothing
outside the package names the engine; adding one is its package plus one line in `registry`, and
its rows of the Database I/O dashboard in the dashboards' generator (CONTRIBUTING.md, "Adding a source").

Beside the engine packages, what they share: the database sources' base (`dbsource`, `dbsession`), the
one build (`engine.Engine.build`, `build`).
This package is above the core (the config, the host, the sources' interface), which imports none of
it; the registry assembles the engines with the core (docs/architecture.md, "The layers").
"""
