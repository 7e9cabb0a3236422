from benchc.select.cli import main

raise SystemExit(main())
