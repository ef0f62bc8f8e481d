"""`python -m report`: what scripts/preview-report runs."""

import sys

from report.cli import main

if __name__ == "__main__":
    sys.exit(main())
