"""Every fact of a file, streamed: the same verdicts as a list, and resumes that are exact.

A run over a whole file keeps no list of facts (``FactStream``), looks finished facts up in
an on-disk index (``VerdictIndex``) and streams the summary from disk; what it writes must
be what the in-memory path writes, and a run killed with kill -9 must resume to exactly one
verdict per fact.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest

import kgcheck
import kgcheck.data.hash_spill as hash_spill
from kgcheck.api import plan_run
from kgcheck.data.fact_stream import FactStream
from kgcheck.data.rdf import RdfReader
from kgcheck.data.runfolder import RESUME_INDEX
from kgcheck.runs.runner import input_fingerprint
from tests.integration.test_runner import kill_and_resume
from tests.support.stubs import Behaviour, OllamaStub

LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
VOLATILE = ("run_id", "seconds", "checked_at")


def _kg(path: Path, facts: int, *, repeat: bool = True) -> Path:
    lines = []
    for i in range(facts):
        lines.append(f"<http://ex.org/s{i}> <http://ex.org/p{i % 3}> <http://ex.org/o{i}> .")
        if i % 4 == 0:
            # Names come after the facts that use them: the stream must still find them.
            lines.append(f'<http://ex.org/o{i}> {LABEL} "Object {i}"@en .')
    if repeat:
        lines.append(lines[0])  # the same triple twice: one fact
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# The model these runs name, as the stub lists it (the run checks it is pulled).
MODELS = ("m:latest",)


def _stable(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in VOLATILE}


@pytest.fixture(scope="module")
def stub():
    with OllamaStub(Behaviour(answer="T"), models=MODELS) as server:
        yield server


def test_a_whole_file_streams_the_facts_a_list_holds(tmp_path: Path, stub: OllamaStub) -> None:
    kg = _kg(tmp_path / "kg.nt", 30)
    streamed = plan_run(triples=kg, model="ollama:m", base_url=stub.url)
    listed = plan_run(triples=kg, model="ollama:m", base_url=stub.url, limit=10**6)
    assert isinstance(streamed.facts, FactStream) and isinstance(listed.facts, list)
    assert list(streamed.facts) == listed.facts
    assert len(streamed.facts) == 30, "the repeated triple is one fact"
    assert streamed.info.input["sha256"] == input_fingerprint(listed.facts)["sha256"]
    assert streamed.info.input["drawn"] == {"how": "all"}
    named = [f for f in streamed.facts if f.names and f.names.get("object")]
    assert len(named) == 8 and named[0].names["object"] == "Object 0"
    assert any("repeat another" in str(note) for note in streamed.notes)


def test_a_repeat_past_the_memory_cap_is_found_and_the_spill_removed(
        tmp_path: Path, stub: OllamaStub, monkeypatch: pytest.MonkeyPatch) -> None:
    # 31 facts over a cap of 4 id hashes: they spill, the repeat far from its first.
    spills = tmp_path / "tmp"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    monkeypatch.setattr(hash_spill, "MEMORY_HASHES", 4)
    monkeypatch.setattr("kgcheck.data.fact_stream._PENDING_HASHES", 3)
    spilled = []
    real = hash_spill.HashSpill._spill

    def counted(self: hash_spill.HashSpill) -> None:
        spilled.append(self._size)
        real(self)

    monkeypatch.setattr(hash_spill.HashSpill, "_spill", counted)
    plan = plan_run(triples=_kg(tmp_path / "kg.nt", 30), model="ollama:m", base_url=stub.url)
    assert len(plan.facts) == 30 and isinstance(plan.facts, FactStream)
    assert plan.facts.repeats == 1
    assert spilled and not list(spills.iterdir())


def test_planning_a_whole_file_reads_it_once_and_a_pass_once_more(
        tmp_path: Path, stub: OllamaStub, monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch of the fingerprinting pass must not read the file for its names (names are
    # complete only once a pass has ended): that made a pass quadratic in the file.
    monkeypatch.setattr("kgcheck.data.fact_stream.NAME_BATCH", 7)
    monkeypatch.setattr(FactStream.__init__, "__defaults__", (None, 7))
    reads = []
    real = RdfReader._triples

    def counted(self: RdfReader):  # type: ignore[no-untyped-def]
        reads.append(1)
        return real(self)

    monkeypatch.setattr(RdfReader, "_triples", counted)
    plan = plan_run(triples=_kg(tmp_path / "kg.nt", 60), model="ollama:m", base_url=stub.url)
    scanned = len(reads)
    named = [f for f in plan.facts if f.names and f.names.get("object")]
    assert len(named) == 15
    assert scanned <= 3, f"planning read the file {scanned} times"
    assert len(reads) - scanned == 1, "a pass over the facts reads the file once"


def test_the_streamed_run_writes_what_the_listed_run_writes(tmp_path: Path,
                                                            stub: OllamaStub) -> None:
    kg = _kg(tmp_path / "kg.nt", 25)
    whole = kgcheck.run(triples=kg, model="ollama:m", base_url=stub.url, cache=False,
                        out=tmp_path / "whole")
    first = kgcheck.run(triples=kg, model="ollama:m", base_url=stub.url, cache=False,
                        limit=10**6, out=tmp_path / "listed")
    ours = {r["fact_id"]: _stable(r) for r in whole.records}
    theirs = {r["fact_id"]: _stable(r) for r in first.records}
    assert ours == theirs and len(ours) == 25
    for key in ("n", "verdicts", "errors", "na", "tokens_in", "by_predicate"):
        assert whole.summary[key] == first.summary[key], key
    assert whole.summary["asked"] == 25
    assert not (tmp_path / "whole" / RESUME_INDEX).exists(), "the index is removed at the end"


def test_a_resume_of_an_edited_file_is_refused(tmp_path: Path, stub: OllamaStub) -> None:
    kg = tmp_path / "kg.jsonl"
    rows = [{"id": str(i), "subject": f"S{i}", "predicate": "p", "object": f"O{i}"}
            for i in range(12)]
    kg.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kgcheck.run(triples=kg, model="ollama:m", base_url=stub.url, cache=False,
                out=tmp_path / "run")
    rows[4]["object"] = "Another object"  # same id, another fact
    kg.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(kgcheck.api.RunError, match=r"1 of the 12 facts with verdicts are not "
                                                  r"the facts those verdicts were given for, "
                                                  r"e\.g\. fact '4'"):
        kgcheck.run(triples=kg, model="ollama:m", base_url=stub.url, cache=False,
                    out=tmp_path / "run", resume=True)


def test_a_whole_file_run_killed_with_kill_9_resumes_exactly(tmp_path: Path) -> None:
    kg = _kg(tmp_path / "kg.nt", 150)
    out = tmp_path / "run"
    with OllamaStub(Behaviour(answer="F", delay=0.02), models=MODELS) as slow:
        cmd = [sys.executable, "-m", "kgcheck.cli", "run", "--triples", str(kg), "--model",
               "ollama:m", "--base-url", slow.url, "--no-cache", "--concurrency", "4",
               "--out", str(out), "--no-progress"]
        verdicts = out / "verdicts.jsonl"
        written = kill_and_resume(cmd, verdicts, after=20, total=150)
    lines = [json.loads(line) for line in verdicts.read_text().splitlines() if line.strip()]
    ids = [r["fact_id"] for r in lines]
    assert len(ids) == len(set(ids)) == 150
    assert set(ids) == {f.id for f in kgcheck.select_facts(kg)}
    assert all(r["label"] == "F" and not r.get("error") for r in lines)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 150 and summary["ran_this_time"] == 150 - written


def test_a_malformed_line_far_into_the_file_fails_before_any_fact_runs(
        tmp_path: Path, stub: OllamaStub) -> None:
    kg = _kg(tmp_path / "kg.nt", 40, repeat=False)
    with kg.open("a") as fh:
        fh.write("<http://ex.org/broken> <http://ex.org/p> .\n")
    with pytest.raises(ValueError, match=r"kg\.nt, line \d+: malformed N-Triples"):
        kgcheck.run(triples=kg, model="ollama:m", base_url=stub.url, cache=False,
                    out=tmp_path / "run")
    assert not (tmp_path / "run" / "verdicts.jsonl").exists()
