"""Deprecated: the XMemo race campaign is ``simulations.xmemo.races`` now; this name forwards to it
for one release, so regression files exported by earlier releases still run."""

from __future__ import annotations

import warnings

from simulations.xmemo.races import *  # noqa: F403
from simulations.xmemo.races import __all__ as __all__

warnings.warn("simulations.xmemo_races is deprecated: import simulations.xmemo.races instead", DeprecationWarning,
              stacklevel=2)
