"""`python -m watch` = scripts/watch."""

import sys

from watch.cli import main

sys.exit(main())
