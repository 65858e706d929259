import sys

from hetlb.cli import main

sys.exit(main())
