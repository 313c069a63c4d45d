"""``aidememo_ref.wire``, the wire shapes' documented path: the same names as ``aidememo_wire.shapes``."""

from __future__ import annotations

from aidememo_wire.shapes import *  # noqa: F403
from aidememo_wire.shapes import __all__ as __all__
