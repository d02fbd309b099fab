"""`python -m webhook.cli` runs the `gpu-admission` command."""

from webhook.cli.main import main

raise SystemExit(main())
