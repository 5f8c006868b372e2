from rerank.cli import main

raise SystemExit(main())
