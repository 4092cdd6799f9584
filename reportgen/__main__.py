from reportgen.cli import main

raise SystemExit(main())
