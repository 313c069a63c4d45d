"""``aidememo_ref.client``, the client's documented path: the same names as ``aidememo_client.client``."""

from __future__ import annotations

from aidememo_client.client import *  # noqa: F403
from aidememo_client.client import __all__ as __all__
