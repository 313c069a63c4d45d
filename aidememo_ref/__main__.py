"""``python -m aidememo_ref`` is ``aidememo-ref``."""

from aidememo_ref._cli import main

raise SystemExit(main())
