import sys

from lunlat.cli import main

sys.exit(main())
