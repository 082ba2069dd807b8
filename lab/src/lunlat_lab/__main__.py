"""`python -m lunlat_lab`: the `lunlat-lab` command."""

import sys

from lunlat_lab.cli import main

sys.exit(main())
