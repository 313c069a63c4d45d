"""Deprecated: the XMemo reference is ``xmemo_ref`` now; this name forwards to it for one release."""

from __future__ import annotations

import warnings

import xmemo_ref
from xmemo_ref import __all__ as __all__

warnings.warn("aidememo_ref.xmemo is deprecated: import xmemo_ref instead", DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> object:
    # xmemo_ref resolves its names lazily; forwarding keeps that (nothing heavy until asked for).
    return getattr(xmemo_ref, name)


def __dir__() -> list[str]:
    return sorted(__all__)
