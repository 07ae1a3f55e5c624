"""Every file kgcheck writes goes through the atomic writer; a killed writer's leftover goes.

The source of the whole namespace is scanned for writes in place (``write_text``,
``write_bytes``, ``open(..., "w")``, ``savefig(path)``, ``json.dump`` to a file, ...): one
outside ``kgcheck/data/atomic.py`` and outside a ``with atomic_output(...)`` block fails
here, unless it is listed below with the reason it is no file written whole (a lock, an
append-only log, a scratch file).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

from kgcheck.data import atomic
from tests.conftest import ROOT

PACKAGES = ("graphs", "evals", "retrievers", "kgcheck", "prompts")
ATOMIC = {"atomic_output", "atomic_path"}
WRITE_METHODS = {"write_text", "write_bytes", "savefig", "to_csv", "to_parquet", "to_json",
                 "to_feather", "to_excel"}
DUMPERS = {("json", "dump"), ("pickle", "dump"), ("np", "save"), ("numpy", "save"),
           ("shutil", "copy"), ("shutil", "copyfile"), ("shutil", "copy2")}
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
# (file, start of the call's source as ``ast.unparse`` writes it): why it is not a file
# kgcheck writes whole.
ALLOWED = {
    ("kgcheck/data/runfolder.py", "(out_dir / LOCK).open('w')"):
        "a lock file, empty: flock on it says who writes the folder",
    ("kgcheck/data/runfolder.py", "os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT"):
        "verdicts.jsonl is append-only, one whole line at a time (VerdictSink)",
    ("kgcheck/data/shard_store.py", "path.with_suffix('.lock').open('w')"):
        "a shard's lock file, empty",
    ("kgcheck/data/shard_store.py", "self.write_text("):
        "ShardStore.write_text is itself atomic (a local rename, or one object put)",
    ("kgcheck/runs/ray_pipeline.py", "self.store.write_text("):
        "ShardStore.write_text is itself atomic (a local rename, or one object put)",
    ("kgcheck/review/session.py", "path.open('w')"):
        "the review server's lock file, empty",
    ("retrievers/index.py", "(folder / INDEX_LOCK).open('w')"):
        "the index's lock file, empty",
    ("kgcheck/data/hash_spill.py", "(self._folder / 'runs').open('w+b')"):
        "a scratch file in a private temporary folder, removed after use",
    ("kgcheck/view/figures.py", "fig.savefig(out, format='png', dpi=110, "
                                "bbox_inches='tight')"):
        "a figure drawn into memory (io.BytesIO) for the explorer, no file",
}


def _mode(call: ast.Call, position: int) -> str | None:
    for keyword in call.keywords:
        if keyword.arg == "mode" and isinstance(keyword.value, ast.Constant):
            return str(keyword.value.value)
    if len(call.args) > position and isinstance(call.args[position], ast.Constant):
        return str(call.args[position].value)
    return None


def _writes(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name) and func.id == "open":
        return any(c in (_mode(call, 1) or "") for c in "wax+")
    if isinstance(func, ast.Name) and func.id in ("GzipFile",):
        return any(c in (_mode(call, 1) or "") for c in "wax+")
    if not isinstance(func, ast.Attribute):
        return False
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    if (owner, func.attr) in DUMPERS or func.attr in WRITE_METHODS:
        return True
    if func.attr == "open" and owner == "os":
        flags = {n.attr for n in ast.walk(call.args[1]) if isinstance(n, ast.Attribute)} \
            if len(call.args) > 1 else set()
        return bool(flags & WRITE_FLAGS)
    if func.attr == "open" or (owner in ("gzip", "bz2", "lzma") and func.attr == "open") \
            or func.attr == "GzipFile":
        position = 1 if owner in ("gzip", "bz2", "lzma") or func.attr == "GzipFile" else 0
        return any(c in (_mode(call, position) or "") for c in "wax+")
    return False


def _inside_atomic(tree: ast.AST) -> set[int]:
    """Return the ids of the calls made inside a ``with atomic_output(...)`` block."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.With | ast.AsyncWith):
            continue
        names = {getattr(item.context_expr.func, "id", getattr(item.context_expr.func, "attr",
                                                                None))
                 for item in node.items if isinstance(item.context_expr, ast.Call)}
        if names & ATOMIC:
            inside |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
            # ``with atomic_output(p) as sink, gzip.GzipFile(fileobj=sink)``: also the items
            inside |= {id(n) for item in node.items for n in ast.walk(item.context_expr)}
    return inside


def in_place_writes() -> list[tuple[str, str, int]]:
    """Return (file, call source, line) of every write in place in the namespace's source."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "kgcheck/data/atomic.py" or "/static/" in rel:
                continue
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
            inside = _inside_atomic(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and id(node) not in inside and _writes(node):
                    found.append((rel, ast.unparse(node), node.lineno))
    return found


def _allowed(rel: str, call: str) -> bool:
    return any(rel == file and (call == snippet or call.startswith(snippet))
               for file, snippet in ALLOWED)


def test_no_file_is_written_in_place_outside_the_atomic_writer() -> None:
    found = in_place_writes()
    unlisted = [f"{rel}:{line}: {call}" for rel, call, line in found if not _allowed(rel, call)]
    assert unlisted == [], "write these through kgcheck.data.atomic:\n" + "\n".join(unlisted)
    stale = [key for key in ALLOWED if not any(_allowed(rel, call) and rel == key[0]
                                               and call.startswith(key[1])
                                               for rel, call, _ in found)]
    assert stale == [], f"allowed writes no longer in the source: {stale}"


def test_the_scan_catches_each_kind_of_write_in_place() -> None:
    for source in ('p.write_text("x")', 'open(p, "w")', 'open(p, mode="ab")',
                   'Path(p).open("w")', "fig.savefig(path)", "json.dump(d, fh)",
                   'gzip.open(p, "wt")', "os.open(p, os.O_WRONLY)", "df.to_csv(p)"):
        call = ast.parse(source).body[0].value
        assert _writes(call), source
    for source in ('open(p)', 'open(p, "rb")', 'p.open(encoding="utf-8")',
                   "json.dumps(d)", "os.open(p, os.O_RDONLY)"):
        call = ast.parse(source).body[0].value
        assert not _writes(call), source
    inside = ast.parse("with atomic_output(p) as h:\n    fig.savefig(h)\n")
    assert {id(n) for n in ast.walk(inside)} & _inside_atomic(inside)


def test_a_killed_writers_temporary_file_goes_with_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "table.md"
    # A child writes part of the file and is killed outright, as by kill -9.
    script = ("import os, signal\n"
              "from kgcheck.data.atomic import atomic_output\n"
              f"with atomic_output({str(target)!r}) as sink:\n"
              "    sink.write(b'part'); sink.flush()\n"
              "    os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = subprocess.run([sys.executable, "-c", script], env=env, timeout=60)
    assert killed.returncode == -9
    (left,) = tmp_path.glob(".table.md.*.tmp")
    # A writer alive now, of another file in the folder: its file is never touched.
    other = tmp_path / f".other.md.{os.getppid()}.abcdefgh.tmp"
    other.write_bytes(b"")
    old = tmp_path / ".legacy.md.abcdefgh.tmp"  # the naming before the pid, an hour old
    old.write_bytes(b"")
    os.utime(old, (time.time() - 2 * atomic.UNLOCKED_AGE,) * 2)
    young = tmp_path / ".young.md.abcdefgh.tmp"
    young.write_bytes(b"")
    atomic._swept.discard(os.path.abspath(tmp_path))
    atomic.write_text_atomic(target, "whole\n")
    assert target.read_text() == "whole\n"
    assert not left.exists() and not old.exists()
    assert other.exists() and young.exists()


def test_a_temporary_file_being_written_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    with atomic.atomic_output(target) as sink:
        sink.write(b"{}")
        (tmp,) = tmp_path.glob(".a.json.*.tmp")
        # Seen from another process of the same name's writer: the lock keeps it.
        assert atomic._remove_if_abandoned(tmp, None) is False
        os.utime(tmp, (time.time() - 2 * atomic.UNLOCKED_AGE,) * 2)
        assert atomic._remove_if_abandoned(tmp, None) is False and tmp.exists()
    assert target.read_bytes() == b"{}" and not list(tmp_path.glob(".*.tmp"))
