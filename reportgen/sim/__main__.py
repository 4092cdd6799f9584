"""``python -m reportgen.sim``: the simulated server as a process of its own."""

from reportgen.sim.cli import main

raise SystemExit(main())
