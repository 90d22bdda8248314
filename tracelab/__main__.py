from tracelab.app.cli import main

raise SystemExit(main())
