"""``python -m aidememo_ref`` is ``aidememo-ref``."""

from aidememo_cli import main

raise SystemExit(main())
