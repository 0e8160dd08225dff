"""`python -m mcd` entry point."""

from mcd.cli import main

raise SystemExit(main())
