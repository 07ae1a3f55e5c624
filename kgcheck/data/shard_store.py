"""Where a sharded run's shard files live: the run folder's ``shards/``, or a URI.

A sharded run (``kgcheck.runs.ray_pipeline``) has its workers write ``NNNNN.jsonl`` (a
shard's verdicts) and ``NNNNN.done`` (its marker) into a store, and its driver leave
``.stop`` there. By default the store is ``RUN/shards/`` (one machine, or a shared file
system). With ``kgcheck run --shards-uri URI`` it is any fsspec URL (``s3://bucket/run``,
``gs://...``, ``abfs://...``), so that the nodes of a cluster need no shared file system for
their output: credentials and endpoints come from each node's environment as the storage's
own client reads them (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...), never from
kgcheck's files.

What holds in both: a marker is written after the shard's verdicts, and a reader takes a
shard as finished only when its marker is there. On a local store a shard's file is appended
fact by fact under a lock. An object store cannot append: a worker checks its shard into a
scratch file (starting from the shard's object, if an earlier try left one) and uploads it
whole when the shard ends or stops, each upload one object replaced at once. So a worker
killed part way through a shard on an object store loses that shard's work since its last
upload; the shard runs again from there.

Readers of a run folder whose plan names a remote store (``kgcheck report``, ``export``,
``estimate``, ...) read local copies: ``pull`` brings the shards' files that changed into
``RUN/shards/`` (checked by size and ETag against ``RUN/shards/.pulled.json``).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from kgcheck.arguments import literal
from kgcheck.data import safe_json
from kgcheck.data.atomic import atomic_path, write_text_atomic
from kgcheck.data.run_errors import RunError
from kgcheck.data.storage_uri import is_uri, shown

__all__ = ["PULLED", "ShardStore", "StoreError", "shard_name"]

# The local copies' manifest in RUN/shards/: name -> [size, ETag] of each pulled object.
PULLED = ".pulled.json"


class StoreError(RunError):
    """A shard store that cannot be reached, read or written: one line naming it."""


def shard_name(index: int, suffix: str) -> str:
    """Return the file name of shard ``index`` (``00007.jsonl``, ``00007.done``)."""
    return f"{index:05d}{suffix}"


def _is_shard_file(name: str) -> bool:
    stem, dot, suffix = name.partition(".")
    return stem.isdigit() and f"{dot}{suffix}" in (".jsonl", ".done")


class ShardStore:
    """The shard files of one sharded run, in a local folder or at a URI."""

    def __init__(self, where: str | Path) -> None:
        self.where = str(where)
        self.remote = is_uri(self.where)
        self._fs: Any = None
        self._root = self.where.rstrip("/")
        # Shards whose object and marker were written by ``finish``: no upload on leaving.
        self._finished: set[int] = set()

    def __repr__(self) -> str:
        return f"ShardStore({self.shown!r})"

    @property
    def shown(self) -> str:
        """The store as it may be shown (a URI's credentials left out)."""
        return shown(self.where)

    @property
    def fs(self) -> Any:
        """The fsspec file system of a remote store (made on first use)."""
        if self._fs is None:
            import fsspec

            try:
                self._fs, self._root = fsspec.core.url_to_fs(self.where)
            except (ImportError, ValueError) as exc:
                raise StoreError(f"cannot use the shard store {literal(shown(self.where))}: "
                                 f"{literal(str(exc).splitlines()[0])}") from None
            self._root = self._root.rstrip("/")
        return self._fs

    def _path(self, name: str) -> str:
        return f"{self._root}/{name}"

    @contextmanager
    def _reaching(self, what: str) -> Iterator[None]:
        """Turn a storage client's failure into one line naming the store and the act."""
        try:
            yield
        except StoreError:
            raise
        except FileNotFoundError as exc:
            # Not a file the caller looks for (those are handled inside): the bucket itself.
            raise StoreError(f"cannot {what} the shard store {literal(shown(self.where))}: "
                             f"no such bucket or container ({literal(str(exc))})") from None
        except Exception as exc:  # noqa: BLE001 - storage clients raise many kinds
            said = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise StoreError(f"cannot {what} the shard store {literal(shown(self.where))}: "
                             f"{literal(type(exc).__name__ + (': ' + said if said else ''))}"
                             ) from None

    def check(self) -> None:
        """Make sure the store can be listed and written (before any worker starts)."""
        if not self.remote:
            Path(self.where).mkdir(parents=True, exist_ok=True)
            return
        with self._reaching("write to"):
            self.fs.pipe_file(self._path(".probe"), b"kgcheck\n")
            self.fs.rm_file(self._path(".probe"))

    def names(self) -> dict[str, dict[str, Any]]:
        """Return the store's non-empty shard files: name -> {size, etag}."""
        if not self.remote:
            folder = Path(self.where)
            if not folder.is_dir():
                return {}
            return {p.name: {"size": p.stat().st_size} for p in folder.iterdir()
                    if _is_shard_file(p.name) and p.is_file() and p.stat().st_size}
        with self._reaching("list"):
            self.fs.invalidate_cache(self._root)
            try:
                found = self.fs.ls(self._root, detail=True)
            except FileNotFoundError:
                return {}
        out = {}
        for item in found:
            name = str(item["name"]).rstrip("/").rpartition("/")[2]
            if item.get("type") == "file" and _is_shard_file(name) and item.get("size"):
                out[name] = {"size": int(item["size"]), "etag": item.get("ETag")}
        return out

    def read_text(self, name: str) -> str | None:
        """Return a file's text (None: no such file)."""
        if self.remote:
            with self._reaching("read from"):
                try:
                    data = self.fs.cat_file(self._path(name))
                except FileNotFoundError:
                    return None
            return bytes(data).decode("utf-8", errors="replace")
        try:
            return (Path(self.where) / name).read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        except OSError as exc:
            raise StoreError(f"cannot read {literal(str(Path(self.where) / name))}: "
                             f"{literal(exc.strerror or str(exc))}") from None

    def write_text(self, name: str, text: str) -> None:
        """Write a file whole or not at all (a local rename, or one object put)."""
        if not self.remote:
            Path(self.where).mkdir(parents=True, exist_ok=True)
            write_text_atomic(Path(self.where) / name, text)
            return
        with self._reaching("write to"):
            self.fs.pipe_file(self._path(name), text.encode("utf-8"))

    def exists(self, name: str) -> bool:
        """Tell whether a file is there."""
        if not self.remote:
            return (Path(self.where) / name).exists()
        with self._reaching("read from"):
            self.fs.invalidate_cache(self._root)
            return bool(self.fs.exists(self._path(name)))

    def remove(self, name: str) -> None:
        """Remove a file; one that is not there is no error."""
        if not self.remote:
            (Path(self.where) / name).unlink(missing_ok=True)
            return
        with self._reaching("write to"), suppress(FileNotFoundError):
            self.fs.rm_file(self._path(name))

    def clear(self) -> None:
        """Remove every shard file (a run started over)."""
        for name in self.names():
            self.remove(name)

    @contextmanager
    def shard_file(self, index: int) -> Iterator[Path]:
        """Yield the local file a worker checks shard ``index`` into, held for it alone.

        Local: the shard's own file, under its lock. Remote: a scratch copy of the shard's
        object (empty if there is none), uploaded whole when the block ends, also when it
        ends early, so that a stopped shard keeps its verdicts.
        """
        name = shard_name(index, ".jsonl")
        if not self.remote:
            path = Path(self.where) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.with_suffix(".lock").open("w") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield path
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
            return
        scratch = Path(tempfile.mkdtemp(prefix="kgcheck-shard-"))
        try:
            path = scratch / name
            with self._reaching("read from"), suppress(FileNotFoundError):
                self.fs.get_file(self._path(name), str(path))
            try:
                yield path
            finally:
                if index not in self._finished and path.exists() and path.stat().st_size:
                    with self._reaching("write to"):
                        self.fs.put_file(str(path), self._path(name))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def finish(self, index: int, path: Path, marker: str) -> None:
        """Leave shard ``index``'s marker, after its verdicts (``path``) are in the store."""
        if self.remote:
            with self._reaching("write to"):
                self.fs.put_file(str(path), self._path(shard_name(index, ".jsonl")))
            self._finished.add(index)
        self.write_text(shard_name(index, ".done"), marker)

    def local_copy(self, name: str, into: Path) -> Path:
        """Return a local path holding the store's file ``name`` (remote: copied ``into``).

        One request looks the file up (not a listing of the store: a worker calls this for
        its own shard, so a listing each time would cost as much as the store is large).
        """
        if not self.remote:
            return Path(self.where) / name
        item = self._item(name)
        self._copy(into, {name: item} if item is not None else {}, prune=False)
        return into / name

    def pull(self, into: Path, only: set[str] | None = None) -> list[Path]:
        """Copy the store's verdict files that changed into ``into``; return them in order.

        Files already there with the same size and ETag are kept; copies of files the store
        no longer has are removed. Each copy is written atomically.
        """
        held = {n: i for n, i in self.names().items()
                if n.endswith(".jsonl") and (only is None or n in only)}
        self._copy(into, held, prune=only is None)
        return [into / n for n in sorted(held)]

    def _item(self, name: str) -> dict[str, Any] | None:
        """Return a remote shard file's size and ETag, as ``names`` gives them (None: absent)."""
        path = self._path(name)
        with self._reaching("read from"):
            self.fs.invalidate_cache(path)
            try:
                item = self.fs.info(path)
            except FileNotFoundError:
                return None
        if item.get("type") != "file" or not item.get("size"):
            return None
        return {"size": int(item["size"]), "etag": item.get("ETag")}

    def _copy(self, into: Path, held: Mapping[str, Mapping[str, Any]], *, prune: bool) -> None:
        """Copy the ``held`` files whose size or ETag changed; with ``prune`` drop the rest."""
        into.mkdir(parents=True, exist_ok=True)
        manifest_path = into / PULLED
        try:
            manifest = safe_json.parse(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = {}
        for name, item in sorted(held.items()):
            stamp = [item["size"], item.get("etag")]
            target = into / name
            if manifest.get(name) == stamp and target.is_file() \
                    and target.stat().st_size == item["size"]:
                continue
            with self._reaching("read from"), atomic_path(target) as tmp:
                self.fs.get_file(self._path(name), str(tmp))
            manifest[name] = stamp
        if prune:
            for name in set(manifest) - set(held):
                (into / name).unlink(missing_ok=True)
                del manifest[name]
        write_text_atomic(manifest_path, json.dumps(manifest) + "\n")
