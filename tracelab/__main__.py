from tracelab.cli import main

raise SystemExit(main())
