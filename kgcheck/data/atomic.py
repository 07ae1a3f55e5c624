"""Write files whole or not at all: every file kgcheck writes goes through here.

A temporary file beside the target receives the bytes, is flushed to disk, and replaces the
target in one rename; a failure part way (disk full, file too large) leaves the old file as
it was and no temporary file behind. A process killed outright (kill -9, a power cut) cannot
remove its temporary file: the old file is still intact, and the next write into that folder
removes the leftover.

A temporary file is named ``.<target name>.<writer's pid>.<random>.tmp`` and locked
(``flock``) by its writer while it is written. A leftover is one of that naming whose writer
is gone and whose lock is free: no other writer's file is ever touched, however many write
the folder at once.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

__all__ = ["atomic_output", "atomic_path", "remove_leftovers", "write_bytes_atomic",
           "write_text_atomic"]

# ``.<name>.<pid>.<8 random characters of mkstemp>.tmp``; files of the older naming without
# the pid or the lock (``.<name>.<random>.tmp``) count once they are an hour old.
_TEMPORARY = re.compile(r"^\.(?P<name>.+?)\.(?:(?P<pid>\d+)\.)?[a-z0-9_]{8}\.tmp$")
# Folders this process has already cleared of leftovers: a folder of many files (a sharded
# run's shards/) is listed once per process, not once per file written.
_swept: set[str] = set()
_swept_lock = threading.Lock()
UNLOCKED_AGE = 3600.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _remove_if_abandoned(path: Path, pid: int | None) -> bool:
    """Remove a temporary file whose writer is gone and whose lock is free."""
    if pid is not None and _alive(pid):
        return False
    if pid is None:
        try:
            if time.time() - path.stat().st_mtime < UNLOCKED_AGE:
                return False
        except OSError:
            return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a writer still holds it
    else:
        with suppress(OSError):
            path.unlink()
        return True
    finally:
        os.close(fd)


def remove_leftovers(folder: str | Path) -> list[Path]:
    """Remove the temporary files that killed writers left in ``folder``; return them."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMPORARY.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        pid = int(match["pid"]) if match["pid"] else None
        if pid != os.getpid() and _remove_if_abandoned(Path(entry.path), pid):
            removed.append(Path(entry.path))
    return removed


def _sweep_once(folder: Path) -> None:
    key = os.path.abspath(folder)
    with _swept_lock:
        if key in _swept:
            return
        _swept.add(key)
    remove_leftovers(folder)


@contextmanager
def _replacing(target: Path) -> Iterator[str]:
    """Yield a new temporary file beside ``target``; rename it onto ``target`` after the block.

    When the block raises, the temporary file is removed and ``target`` stays as it was.
    """
    _sweep_once(target.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp",
                               dir=target.parent)
    try:
        # Held until the file is renamed or removed: a leftover sweep leaves it alone.
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield tmp
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise
    finally:
        os.close(fd)


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


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data``, atomically and durably."""
    with atomic_output(path) as handle:
        handle.write(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8), atomically and durably."""
    write_bytes_atomic(path, text.encode("utf-8"))
