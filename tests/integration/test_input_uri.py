"""An input file at a URL (moto's S3 server on loopback), cut by seeking and read by range.

Cut by seeking, an object gives the shards a local copy's one-pass cut gives (byte ranges
and first lines, any shard size, a line longer than a probe, no final line end), and
surveyed and read by range, the same facts and fingerprint. A missing object or bucket, an
unreachable endpoint, a protocol without its package, credentials in the URL, a format
that cannot be cut and a run that is not sharded each fail in one line naming the URL; so
does a malformed line (with its line number) and an object replaced after the plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kgcheck.data import input_uri
from kgcheck.data.input_uri import is_input_uri, read_range, stat_input
from kgcheck.data.shard_survey import (
    ShardSource,
    combine_digests,
    find_repeats,
    head_facts,
    merge_names,
    shard_drops,
    shard_facts,
    survey_shard,
)
from kgcheck.data.shards import Shard, plan_shards, seek_shards, shard_bytes
from kgcheck.data.sources import TriplesError
from kgcheck.runs.plan import SettingsError
from tests.integration.test_shards import nt_file

pytest.importorskip("s3fs", reason="pip install 'kgcheck[s3]' (make install)")


def _upload(s3: Any, path: Path, key: str) -> str:
    s3.fs().put_file(str(path), f"{s3.bucket}/{key}")
    return s3.uri(key)


def _jsonl(path: Path, count: int = 60) -> Path:
    rows = [json.dumps({"subject": f"s{n}", "predicate": f"p{n % 3}", "object": f"o{n}"})
            for n in range(count)]
    rows.insert(7, "")  # a blank line still counts as a line
    path.write_text("\n".join(rows))  # and no line end after the last
    return path


def _surveyed(source: ShardSource, shards: list[Shard], partitions: int = 2
              ) -> tuple[list[Any], int]:
    """Survey and read every shard as the pipeline's tasks do: the facts and fingerprint."""
    found = [survey_shard(source, shard, n, partitions) for n, shard in enumerate(shards)]
    names = merge_names(part for _, part, _ in found) if source.rdf else None
    settled = [find_repeats([ids[j] for _, _, ids in found]) for j in range(partitions)]
    facts = []
    for n, shard in enumerate(shards):
        facts += [f.model_dump() for f in shard_facts(
            source, shard, shard_drops([d for d, _ in settled], n), names)]
    return facts, combine_digests((s.digest, s.kept) for s, _, _ in found)


@pytest.mark.parametrize("size", [23, 700, 10**6])
def test_cutting_by_seeking_gives_the_local_cut_and_its_facts(
        tmp_path: Path, s3: Any, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(input_uri, "LINE_PROBE", 16)  # lines longer than a probe
    for path in (nt_file(tmp_path / "kg.nt"), _jsonl(tmp_path / "kg.jsonl")):
        uri = _upload(s3, path, f"{tmp_path.name}/{path.name}")
        local = plan_shards(path, "kg", size)
        remote = seek_shards(uri, "kg", size)
        assert [(s.start, s.end, s.first_line) for s in remote] == [
            (s.start, s.end, s.first_line) for s in local]
        assert (len(remote) > 1) == (size < 10**6)
        assert all(s.path == uri for s in remote)
        stamp = stat_input(uri).stamp
        assert stamp and b"".join(shard_bytes(s, stamp) for s in remote) == path.read_bytes()
        here = _surveyed(ShardSource(str(path), "kg"), local)
        there = _surveyed(ShardSource(uri, "kg", stamp=stamp), remote)
        assert there == here and len(here[0]) == (138 if path.suffix == ".nt" else 60)


def test_the_first_facts_are_read_from_the_start_of_the_object(tmp_path: Path,
                                                               s3: Any) -> None:
    path = _jsonl(tmp_path / "kg.jsonl")
    uri = _upload(s3, path, f"{tmp_path.name}/kg.jsonl")
    facts = list(head_facts(ShardSource(uri, "kg"), block=50))
    assert [f.subject for f in facts] == [f"s{n}" for n in range(60)]
    # Ids that come from line numbers count the blank line, as a one-pass read does.
    assert facts[-1].model_dump() == _surveyed(ShardSource(str(path), "kg"),
                                               plan_shards(path, "kg", 10**6))[0][-1]


def test_a_malformed_line_names_the_url_and_its_line(tmp_path: Path, s3: Any) -> None:
    path = nt_file(tmp_path / "kg.nt")
    lines = path.read_text().splitlines()
    lines[100] = "<http://e.org/s> <http://e.org/p> broken ."
    path.write_text("\n".join(lines) + "\n")
    uri = _upload(s3, path, f"{tmp_path.name}/kg.nt")
    shards = seek_shards(uri, "kg", 500)
    source = ShardSource(uri, "kg")
    with pytest.raises(TriplesError) as raised:
        for n, shard in enumerate(shards):
            survey_shard(source, shard, n, 1)
    said = str(raised.value)
    assert said.startswith(f"{uri}, line 101: malformed") and "\n" not in said


def _one_line(exc: BaseException, *parts: str) -> str:
    said = str(exc)
    assert "\n" not in said and all(p in said for p in parts), said
    return said


def test_what_cannot_be_read_is_named_in_one_line(tmp_path: Path, s3: Any,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  free_port: int) -> None:
    missing = s3.uri(f"{tmp_path.name}/none.nt")
    with pytest.raises(TriplesError) as raised:
        stat_input(missing)
    _one_line(raised.value, f"{missing}: file not found")
    with pytest.raises(TriplesError) as raised:
        stat_input("s3://no-such-bucket-here/kg.nt")
    _one_line(raised.value, "s3://no-such-bucket-here/kg.nt: no such bucket", "no-such-bucket")
    folder = _upload(s3, nt_file(tmp_path / "kg.nt"), f"{tmp_path.name}/in/kg.nt")
    with pytest.raises(TriplesError) as raised:
        stat_input(folder.rpartition("/")[0])
    _one_line(raised.value, "is a folder")
    secret = f"s3://AKIDEXAMPLE:wJalrSECRET@{s3.bucket}/kg.nt"
    with pytest.raises(TriplesError) as raised:
        stat_input(secret)
    assert "wJalrSECRET" not in _one_line(raised.value, "holds credentials")
    with pytest.raises(TriplesError) as raised:
        stat_input("nosuch://bucket/kg.nt")
    _one_line(raised.value, "nosuch://bucket/kg.nt: no storage is known for nosuch://")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3.fs().clear_instance_cache()
    with pytest.raises(TriplesError) as raised:
        stat_input(folder)
    assert "testing-secret" not in _one_line(raised.value, f"{folder}: cannot be read",
                                             "EndpointConnectionError")


def test_an_uninstalled_protocol_names_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec

    def absent(protocol: str) -> Any:
        raise ImportError(f"Install gcsfs to access {protocol}")

    monkeypatch.setattr(fsspec, "get_filesystem_class", absent)
    with pytest.raises(TriplesError) as raised:
        stat_input("gs://bucket/kg.nt")
    _one_line(raised.value, "gs://bucket/kg.nt:", "pip install gcsfs")


def test_an_object_replaced_after_the_plan_is_refused(tmp_path: Path, s3: Any) -> None:
    path = nt_file(tmp_path / "kg.nt")
    uri = _upload(s3, path, f"{tmp_path.name}/kg.nt")
    stamp = stat_input(uri).stamp
    assert read_range(uri, 0, 10, stamp) == path.read_bytes()[:10]
    _upload(s3, nt_file(tmp_path / "kg.nt", count=121), f"{tmp_path.name}/kg.nt")
    with pytest.raises(TriplesError) as raised:
        read_range(uri, 0, 10, stamp)
    _one_line(raised.value, f"{uri}: changed since the run was planned")


def test_only_a_sharded_run_of_a_line_format_reads_a_url(tmp_path: Path, s3: Any) -> None:
    import kgcheck

    uri = _upload(s3, nt_file(tmp_path / "kg.nt"), f"{tmp_path.name}/kg.nt")
    assert is_input_uri(uri) and not is_input_uri(Path(uri)) and not is_input_uri("kg.nt")
    for triples, said in ((uri, "needs engine='ray' over every fact"),
                          (s3.uri("kg.ttl"), "N-Triples, N-Quads or JSON Lines"),
                          (s3.uri("kg.nt.gz"), "cannot be cut at line ends"),
                          (f"s3://AK:wJalrSECRET@{s3.bucket}/kg.nt", "holds credentials")):
        with pytest.raises(SettingsError) as raised:
            kgcheck.run(triples=triples, model="replay:gpt-4o-mini", out=tmp_path / "run")
        assert "wJalrSECRET" not in _one_line(raised.value, "triples=", said)
    with pytest.raises(SettingsError) as raised:
        kgcheck.run(triples=uri, model="replay:gpt-4o-mini", out=tmp_path / "run", limit=3,
                    engine="ray")
    _one_line(raised.value, "needs engine='ray' over every fact")


def test_readers_of_a_run_load_its_facts_from_the_url(tmp_path: Path, s3: Any) -> None:
    from kgcheck.data.runfolder import RunFolderError, checked_facts
    from kgcheck.data.triples import read_triples

    path = nt_file(tmp_path / "kg.nt")
    uri = _upload(s3, path, f"{tmp_path.name}/kg.nt")
    facts = checked_facts(tmp_path, {"source": uri, "dataset": "kg"})
    assert [f.model_dump() for f in facts] == [
        f.model_dump() for f in read_triples(path, "kg")] and len(facts) == 138
    with pytest.raises(RunFolderError) as raised:
        checked_facts(tmp_path, {"source": s3.uri("gone.nt"), "dataset": "kg"})
    _one_line(raised.value, f"{s3.uri('gone.nt')}: file not found")


def test_the_command_line_takes_a_url_and_refuses_it_in_one_line(tmp_path: Path,
                                                                 s3: Any) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    uri = _upload(s3, nt_file(tmp_path / "kg.nt"), f"{tmp_path.name}/kg.nt")
    for triples, said in ((uri, "needs --engine ray over every fact"),
                          (s3.uri(f"{tmp_path.name}/none.nt"), "none.nt: file not found")):
        done = subprocess.run([sys.executable, "-m", "kgcheck.cli", "run", "--triples",
                               triples, "--model", "replay:gpt-4o-mini", "--out",
                               str(tmp_path / "run")], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2, done.stdout + done.stderr
        assert len(lines) == 1 and said in lines[0] and triples in lines[0], lines
