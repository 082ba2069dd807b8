"""Makes alerts/tests a package named from the repository root (`alerts.tests`) for pytest and mypy;
the distribution itself is src/."""
