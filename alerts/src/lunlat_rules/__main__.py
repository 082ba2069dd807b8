import sys

from lunlat_rules.cli import main

sys.exit(main())
