"""Writing the kit's output files without following links planted in the output folder.

Report, diff, history, export and baseline files land in folders other people can write to (a
shared ``reports/``, a CI workspace). Opening ``reports/results.json`` for writing follows a
symbolic link someone put there and overwrites its target. ``write_atomic`` writes a fresh file
beside the destination (created exclusively, never through a link) and renames it over the
destination: a link there is replaced, its target untouched, and a reader never sees half a file.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TextIO

__all__ = ["open_fresh", "write_atomic"]


def _create_beside(path: Path, mode: int) -> tuple[int, Path]:
    """A new, empty file in ``path``'s folder, opened for writing: its descriptor and name."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    # O_EXCL with O_CREAT never opens an existing name, a link included; O_NOFOLLOW says so twice.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    return os.open(temporary, flags, mode), temporary


def write_atomic(path: Path, data: str | bytes, *, mode: int = 0o666, fsync: bool = False) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file in the same folder.

    ``mode``: the new file's permissions before the umask (0o600 for what only the user may
    read, 0o755 for a script). ``fsync``: flush to the disk before the rename, for files that
    must survive a crash (reports need not).

    Raises:
        OSError: when the folder cannot be written; no temporary file is left behind.
    """
    body = data.encode("utf-8") if isinstance(data, str) else data
    fd, temporary = _create_beside(path, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, path)  # replaces a link at ``path`` itself, never its target
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def open_fresh(path: Path, *, mode: int = 0o666) -> TextIO:
    """A new, empty text file at ``path`` (UTF-8), for a file written as it grows (a run's history).

    The new file is renamed over ``path`` before the first byte is written, so whatever was
    there, a planted link included, is replaced and what follows goes to the new file alone.

    Raises:
        OSError: when the folder cannot be written.
    """
    fd, temporary = _create_beside(path, mode)
    try:
        os.replace(temporary, path)
    except BaseException:
        os.close(fd)
        temporary.unlink(missing_ok=True)
        raise
    return os.fdopen(fd, "w", encoding="utf-8")
