"""The shard store: a run folder's ``shards/`` or an S3 URI (moto's server on loopback).

What a sharded run needs of its store holds for both: listing, whole-file writes, a
shard's file checked out and uploaded whole, markers after verdicts. Readers copy a remote
store's files only when they changed; a store that cannot be reached, a missing bucket, an
unknown protocol and ``--shards-uri`` on a run that is not sharded each fail in one line
naming what is wrong, and credentials in a URI are never shown.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kgcheck.data.runfolder import SHARD_PLAN, SHARDS, has_verdicts, verdict_files
from kgcheck.data.shard_store import PULLED, ShardStore, StoreError
from kgcheck.data.storage_uri import is_uri, storage_problem
from tests.conftest import ROOT

pytest.importorskip("s3fs", reason="pip install 'kgcheck[s3]' (make install)")


def test_uris_and_their_shown_form() -> None:
    assert is_uri("s3://bucket/run") and is_uri("gs://b/r") and is_uri("memory://x")
    assert not is_uri("runs/x") and not is_uri("/abs/path") and not is_uri("file:///tmp/x")
    store = ShardStore("s3://AKIDEXAMPLE:wJalrSECRET@bucket/run")
    assert store.shown == "s3://bucket/run"
    assert "SECRET" not in repr(store)


def test_an_unknown_or_uninstalled_protocol_is_named() -> None:
    assert "no storage is known for nosuch://" in (storage_problem("nosuch://b/r") or "")
    assert storage_problem("s3://bucket/run") is None


def _folder_of(tmp_path: Path, uri: str) -> Path:
    """A run folder whose plan names ``uri`` as its store (as a sharded run leaves it)."""
    folder = tmp_path / "run"
    (folder / SHARDS).mkdir(parents=True)
    (folder / SHARDS / SHARD_PLAN).write_text(json.dumps({"version": 1, "store": uri}))
    return folder


def test_readers_copy_only_what_changed_in_the_store(tmp_path: Path, s3: Any) -> None:
    uri = s3.uri(f"{tmp_path.name}/shards")
    store = ShardStore(uri)
    store.write_text("00000.jsonl", '{"fact_id": "a", "label": "T"}\n')
    store.write_text("00000.done", '{"shard": 0}\n')
    store.write_text("00001.jsonl", '{"fact_id": "b", "label": "F"}\n')
    folder = _folder_of(tmp_path, uri)
    assert has_verdicts(folder) and not list((folder / SHARDS).glob("*.jsonl"))
    first = verdict_files(folder)
    assert [p.name for p in first] == ["00000.jsonl", "00001.jsonl"]
    stamps = {p.name: p.stat().st_mtime_ns for p in first}
    manifest = json.loads((folder / SHARDS / PULLED).read_text())
    assert set(manifest) == {"00000.jsonl", "00001.jsonl"}
    # One object changes, one goes: only the changed one is copied again.
    store.write_text("00001.jsonl", '{"fact_id": "b", "label": "T"}\n'
                                    '{"fact_id": "c", "label": "F"}\n')
    store.remove("00000.jsonl")
    again = verdict_files(folder)
    assert [p.name for p in again] == ["00001.jsonl"]
    assert not (folder / SHARDS / "00000.jsonl").exists()
    assert (folder / SHARDS / "00001.jsonl").read_text().count("\n") == 2
    assert stamps["00001.jsonl"] != again[0].stat().st_mtime_ns
    unchanged = again[0].stat().st_mtime_ns
    assert verdict_files(folder)[0].stat().st_mtime_ns == unchanged


def test_one_shard_is_copied_without_listing_the_store(tmp_path: Path, s3: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A worker copies its own shard: a listing each time would grow with the store.
    store = ShardStore(s3.uri(f"{tmp_path.name}/shards"))
    store.write_text("00000.jsonl", '{"fact_id": "a", "label": "T"}\n')
    store.write_text("00001.jsonl", '{"fact_id": "b", "label": "F"}\n')

    def no_listing(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the store was listed")

    monkeypatch.setattr(store.fs, "ls", no_listing)
    into = tmp_path / "copy"
    path = store.local_copy("00001.jsonl", into)
    assert path.read_text() == '{"fact_id": "b", "label": "F"}\n'
    assert not (into / "00000.jsonl").exists()
    assert json.loads((into / PULLED).read_text()).keys() == {"00001.jsonl"}
    # Unchanged, it is not fetched again; changed, it is; absent, nothing is made.
    copied = path.stat().st_mtime_ns
    assert store.local_copy("00001.jsonl", into).stat().st_mtime_ns == copied
    store.write_text("00001.jsonl", '{"fact_id": "b", "label": "T"}\n')
    assert store.local_copy("00001.jsonl", into).read_text().endswith('"T"}\n')
    assert not store.local_copy("00007.jsonl", into).exists()


def test_a_stopped_shard_keeps_its_verdicts_in_the_store(tmp_path: Path, s3: Any) -> None:
    store = ShardStore(s3.uri(f"{tmp_path.name}/shards"))
    with pytest.raises(RuntimeError, match="worker stopped"):
        with store.shard_file(3) as path:
            path.write_text('{"fact_id": "a", "label": "T"}\n')
            raise RuntimeError("worker stopped")
    assert store.read_text("00003.jsonl") == '{"fact_id": "a", "label": "T"}\n'
    assert not store.exists("00003.done")
    # The next try starts from that object; a finished shard has its marker after it.
    with store.shard_file(3) as path:
        assert path.read_text().count("\n") == 1
        with path.open("a") as fh:
            fh.write('{"fact_id": "b", "label": "F"}\n')
        store.finish(3, path, '{"shard": 3}\n')
    assert store.read_text("00003.jsonl").count("\n") == 2
    assert store.names().keys() == {"00003.jsonl", "00003.done"}


def test_a_store_that_cannot_be_reached_fails_in_one_line(
        tmp_path: Path, s3: Any, free_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StoreError) as missing:
        ShardStore(f"s3://no-such-bucket-{tmp_path.name.lower()}/run").check()
    said = str(missing.value)
    assert "no-such-bucket" in said and "\n" not in said
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    # fsspec keeps one client per URL's options: a new one reads the endpoint just set.
    s3.fs().clear_instance_cache()
    with pytest.raises(StoreError) as refused:
        ShardStore(f"s3://{s3.bucket}/elsewhere-{tmp_path.name}").check()
    said = str(refused.value)
    assert said.startswith("cannot write to the shard store s3://") and "\n" not in said
    assert "EndpointConnectionError" in said
    assert "testing-secret" not in said


def test_shards_uri_needs_a_sharded_run(tmp_path: Path) -> None:
    kg = tmp_path / "kg.nt"
    kg.write_text("<http://e.org/s> <http://e.org/p> <http://e.org/o> .\n")
    for extra, said in ((["--shards-uri", "s3://bucket/run"], "needs --engine ray"),
                        (["--shards-uri", "runs/local"], "takes a URL such as s3://"),
                        (["--shards-uri", "s3://AKIDEXAMPLE:wJalrSECRET@bucket/run"],
                         "holds credentials: give them in the environment")):
        done = subprocess.run([sys.executable, "-m", "kgcheck.cli", "run", "--triples",
                               str(kg), "--model", "replay:gpt-4o-mini", "--out",
                               str(tmp_path / "run"), *extra], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2, done.stdout + done.stderr
        assert len(lines) == 1 and said in lines[0] and "--shards-uri" in lines[0], lines
        assert "wJalrSECRET" not in done.stdout + done.stderr


def test_the_python_api_takes_shards_uri_and_names_it(tmp_path: Path) -> None:
    import kgcheck
    from kgcheck.runs.plan import SettingsError

    kg = tmp_path / "kg.nt"
    kg.write_text("<http://e.org/s> <http://e.org/p> <http://e.org/o> .\n")
    with pytest.raises(SettingsError) as raised:
        kgcheck.run(triples=kg, model="replay:gpt-4o-mini", out=tmp_path / "run",
                    shards_uri="s3://bucket/run")
    said = str(raised.value)
    assert "shards_uri='s3://bucket/run'" in said and "engine='ray'" in said
