"""``python -m aidememo_cli._commands`` runs the local command groups directly."""

import sys

from aidememo_cli._commands import main

sys.exit(main(sys.argv[1:]))
