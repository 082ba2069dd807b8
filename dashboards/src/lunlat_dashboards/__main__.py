import sys

from lunlat_dashboards.cli import main

sys.exit(main())
