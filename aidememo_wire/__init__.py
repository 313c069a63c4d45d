"""aidememo_wire: the AideMemo wire protocol's pure definitions (ids, canonical JSON, error codes, shapes)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aidememo_wire.errors import WireError

__all__ = ["WireError"]


def __getattr__(name: str) -> object:
    # Lazily: importing one module of the package loads no other.
    if name == "WireError":
        from aidememo_wire.errors import WireError

        return WireError
    raise AttributeError(f"module 'aidememo_wire' has no attribute {name!r}")
