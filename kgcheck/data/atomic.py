"""Write files whole or not at all: every file kgcheck writes goes through here.

A temporary file beside the target receives the bytes, is flushed to disk, and replaces the
target in one rename; a failure part way (disk full, file too large, kill -9) leaves the old
file as it was and no temporary file behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

__all__ = ["atomic_output", "atomic_path", "write_text_atomic"]


@contextmanager
def _replacing(target: Path) -> Iterator[str]:
    """Yield a new temporary file beside ``target``; rename it onto ``target`` after the block.

    When the block raises, the temporary file is removed and ``target`` stays as it was.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


@contextmanager
def atomic_output(path: str | Path) -> Iterator[IO[bytes]]:
    """Yield a binary file that replaces ``path`` when the block ends without an error.

    Raises:
        OSError: the file could not be written; ``path`` is unchanged.

    """
    with _replacing(Path(path)) as tmp, open(tmp, "wb") as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path that replaces ``path`` when the block ends without an error.

    For writers that need a file name rather than a handle (a SQLite database): what the
    block leaves at the temporary path is flushed to disk and renamed onto ``path``.
    """
    with _replacing(Path(path)) as tmp:
        yield Path(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())


def write_text_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8), atomically and durably."""
    with atomic_output(path) as handle:
        handle.write(text.encode("utf-8"))
