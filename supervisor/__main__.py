"""`python -m supervisor` = scripts/supervise."""

import sys

from supervisor.cli import main

sys.exit(main())
