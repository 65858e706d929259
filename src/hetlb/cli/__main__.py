"""``python -m hetlb.cli``: the same as ``hetlb``."""

import sys

from hetlb.cli import main

sys.exit(main())
