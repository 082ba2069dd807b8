"""Each database engine's rows of the Database I/O dashboard, as data (`spec`: per-wait, per-file,
rate, quantile and bucket queries), by the engine's key; `database_io` draws them.

They live with the dashboards' generator, not in the engines' packages: the exporter's runtime has no
use for them, and the exporter never imports the dashboards package (it depends on the exporter).
Adding an engine (CONTRIBUTING.md, "Adding a source") adds its module here; a test holds the keys to
the engines' registry.
"""

from __future__ import annotations

from lunlat_dashboards.engine_rows import mssql, oracle, postgres
from lunlat_dashboards.engine_rows.spec import DashboardRow

ROWS: dict[str, tuple[DashboardRow, ...]] = {
    "oracle": oracle.ROWS,
    "mssql": mssql.ROWS,
    "postgres": postgres.ROWS,
}
