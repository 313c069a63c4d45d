"""``python -m aidememo_ref._cli.local`` runs the local command groups directly."""

import sys

from aidememo_ref._cli.local import main

sys.exit(main(sys.argv[1:]))
