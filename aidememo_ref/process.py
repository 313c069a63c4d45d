"""``aidememo_ref.process``, the server process runner's documented path: the same names as ``refkit.process``."""

from __future__ import annotations

from refkit.process import *  # noqa: F403
from refkit.process import __all__ as __all__
