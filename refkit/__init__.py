"""refkit: the serving pieces both reference servers share, and no protocol."""

from refkit.errors import RefkitError

__all__ = ["RefkitError"]
