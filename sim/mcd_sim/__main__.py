"""`python -m mcd_sim`: the `mcd-sim` command."""

from mcd_sim.cli import main

raise SystemExit(main())
