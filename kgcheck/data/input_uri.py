"""An input file at a URL (``s3://bucket/kg.nt``, ``gs://...``): checked, cut and read by range.

A sharded run (``kgcheck.runs.ray_pipeline``) may read its input from any fsspec URL, so
that the nodes of a cluster need neither a copy of it nor a shared mount. The driver looks
at the object once (``stat_input``: its size and ETag, and every reason it cannot be read,
in one line naming the URL), cuts it by seeking (``seek_ranges``: a small range read after
each cut point, to the end of the line the cut fell in, as the local cut reads on), and
each task reads only its byte range (``read_range``). Credentials come from each node's
environment as the storage's own client reads them (``AWS_ACCESS_KEY_ID``,
``AWS_ENDPOINT_URL``, ...); a URL holding them is refused, since the run's files keep it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgcheck.data.sources import TriplesError
from kgcheck.data.storage_uri import is_uri, shown, storage_problem

__all__ = ["RemoteInput", "input_problem", "is_input_uri", "local_copy", "read_blocks",
           "read_range", "seek_ranges", "stat_input"]

# Bytes read after a cut point at a time, looking for the end of the line it fell in.
LINE_PROBE = 64 * 1024


@dataclass(frozen=True)
class RemoteInput:
    """An input object as the driver saw it: its URL, size and ETag (or mtime)."""

    uri: str
    size: int
    stamp: str


def is_input_uri(triples: str | Path | None) -> bool:
    """Tell whether a run's input is named by a URL (a ``Path`` never is)."""
    return isinstance(triples, str) and is_uri(triples)


def input_problem(uri: str) -> str | None:
    """Say why a URL cannot name an input, before it is reached (None: it may)."""
    if shown(uri) != uri:
        return (f"{shown(uri)} holds credentials: give them in the environment "
                "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for s3://), not in the URL")
    return storage_problem(uri)


def _fs(uri: str) -> tuple[Any, str]:
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(uri)
    except (ImportError, ValueError) as exc:
        raise TriplesError(f"{shown(uri)}: cannot be read "
                           f"({str(exc).splitlines()[0]})") from None
    return fs, path


def _failure(uri: str, exc: BaseException) -> TriplesError:
    """One line naming the URL and what the storage client said."""
    said = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return TriplesError(f"{shown(uri)}: cannot be read ({type(exc).__name__}"
                        f"{': ' + said if said else ''})")


def stat_input(uri: str) -> RemoteInput:
    """Look at an input object: its size and stamp, or one line saying why it cannot be read.

    Raises:
        TriplesError: no such object or bucket, a folder, an unreachable endpoint, refused
            credentials, a protocol whose package is not installed.

    """
    problem = input_problem(uri)
    if problem:
        raise TriplesError(f"{shown(uri)}: {problem}")
    fs, path = _fs(uri)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise TriplesError(_missing(uri, fs, path)) from None
    except Exception as exc:  # noqa: BLE001 - storage clients raise many kinds
        raise _failure(uri, exc) from None
    if info.get("type") == "directory":
        raise TriplesError(f"{shown(uri)}: is a folder, not a file; give the triples file in it")
    stamp = info.get("ETag") or info.get("etag") or info.get("mtime") or info.get(
        "LastModified") or ""
    return RemoteInput(uri, int(info.get("size") or 0), str(stamp).strip('"'))


def _missing(uri: str, fs: Any, path: str) -> str:
    """Say whether the object or its bucket is missing."""
    bucket = path.split("/", 1)[0]
    try:
        there = bool(fs.exists(bucket)) if bucket and bucket != path else True
    except Exception:  # noqa: BLE001 - the object is missing either way
        there = True
    if not there:
        return f"{shown(uri)}: no such bucket or container ({bucket})"
    return f"{shown(uri)}: file not found"


def read_range(uri: str, start: int, end: int, stamp: str | None = None) -> bytes:
    """Read bytes ``start`` to ``end`` of an object (one ranged request).

    ``stamp`` (the ETag the driver saw) makes sure the object has not been replaced since.
    """
    fs, path = _fs(uri)
    if stamp:
        seen = stat_input(uri).stamp
        if seen != stamp:
            raise TriplesError(f"{shown(uri)}: changed since the run was planned (ETag "
                               f"{stamp}, now {seen}); start the run again")
    try:
        return bytes(fs.cat_file(path, start=start, end=end)) if end > start else b""
    except Exception as exc:  # noqa: BLE001 - storage clients raise many kinds
        raise _failure(uri, exc) from None


def seek_ranges(found: RemoteInput, shard_bytes: int) -> list[tuple[int, int]]:
    """Cut an object into byte ranges of about ``shard_bytes``, each ending at a line end.

    Each cut reads from the byte before the cut point to the first line end (as the local
    cut reads on to the end of the line the cut fell in), so the ranges are the local
    cut's and the driver reads a few kilobytes per shard.
    """
    if shard_bytes < 1:
        raise ValueError(f"shard_bytes must be at least 1, got {shard_bytes}")
    ranges: list[tuple[int, int]] = []
    start = 0
    while start < found.size:
        end = min(start + shard_bytes, found.size)
        at = end - 1
        while end < found.size:
            probe = read_range(found.uri, at, min(at + LINE_PROBE, found.size))
            newline = probe.find(b"\n")
            if newline >= 0:
                end = at + newline + 1
                break
            at += len(probe)
            end = found.size if at >= found.size else end
        ranges.append((start, end))
        start = end
    return ranges


def read_blocks(uri: str, block: int) -> Iterator[bytes]:
    """Yield an object's bytes in blocks of ``block`` (a stream: one block held at a time)."""
    fs, path = _fs(uri)
    try:
        with fs.open(path, "rb", block_size=block) as fh:
            while data := fh.read(block):
                yield data
    except TriplesError:
        raise
    except Exception as exc:  # noqa: BLE001 - storage clients raise many kinds
        raise _failure(uri, exc) from None


@contextmanager
def local_copy(uri: str) -> Iterator[Path]:
    """Yield a local copy of an object (for a reader that needs every fact of a run's input).

    The copy is removed when the block ends.
    """
    stat_input(uri)
    fs, path = _fs(uri)
    folder = Path(tempfile.mkdtemp(prefix="kgcheck-input-"))
    try:
        target = folder / path.rpartition("/")[2]
        try:
            fs.get_file(path, str(target))
        except Exception as exc:  # noqa: BLE001 - storage clients raise many kinds
            raise _failure(uri, exc) from None
        yield target
    finally:
        shutil.rmtree(folder, ignore_errors=True)
