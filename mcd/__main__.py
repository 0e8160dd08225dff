"""`python -m mcd` entry point."""

from mcd.cli.main import main

raise SystemExit(main())
