"""Deprecated: the XMemo client is ``xmemo_ref.client`` now; this name forwards to it for one release."""

from __future__ import annotations

import warnings

from xmemo_ref.client import *  # noqa: F403
from xmemo_ref.client import __all__ as __all__

warnings.warn("aidememo_ref.xmemo.client is deprecated: import xmemo_ref.client instead", DeprecationWarning,
              stacklevel=2)
