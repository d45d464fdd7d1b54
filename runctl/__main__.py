import sys

from runctl.cli import main

sys.exit(main())
