"""Makes dashboards/tests a package named from the repository root (`dashboards.tests`) for pytest and mypy;
the distribution itself is src/."""
