"""The sharded Ray pipeline on a local cluster of two nodes, each with its own model server.

``ray.cluster_utils.Cluster`` starts a head node and a second node on 127.0.0.1, one CPU
each; each node's raylet (and so its workers) has its own ``OLLAMA_HOST``, a stub Ollama
server that answers by a hash of the prompt. A whole N-Triples file (names, a repeated
triple, gold labels) checked by the pipeline gives the local engine's verdicts and
summary; both servers are asked; a worker killed mid-run, and a driver killed with
``kill -9`` then resumed, end with one verdict per fact; a malformed line fails with one
line; report, export and estimate read the sharded folder as they read the local one.
With ``--shards-uri`` the workers write their shards to S3 (moto's server on loopback,
reached through each node's environment) and the folder reads them from there. Repeats
over the pipeline (a stub whose answers flip between repeats) give the local engine's
majority verdicts and summary, and a resume redoes only what a killed worker left.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from kgcheck.data.runfolder import SHARDS, read_verdicts, verdict_files
from tests.conftest import ROOT
from tests.integration.test_runner import kill_and_resume, written_lines
from tests.support.stubs import Behaviour, OllamaStub

ray = pytest.importorskip("ray", reason="the Ray pipeline needs Ray: pip install 'kgcheck[ray]'")
from ray.cluster_utils import Cluster  # noqa: E402 - only once Ray is known to be there

pytestmark = pytest.mark.slow

LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
FACTS = 150
MODEL = "ollama:gemma2:9b"
# Settings that are the run's timing, its engine or its identity, not its verdicts.
VOLATILE = {"seconds", "facts_per_second", "mean_model_seconds", "ran_this_time", "engine",
            "cache", "run_id"}


# Consensus members and their judges (kgcheck's default larger siblings), all on each stub.
MEMBERS = ("ollama:gemma2:9b", "ollama:qwen2.5:7b", "ollama:llama3.1:8b", "ollama:mistral:7b")
JUDGES = ("gemma2:27b", "qwen2.5:14b", "llama3.1:70b", "mistral-nemo:12b")
STUB_MODELS = (*(m.removeprefix("ollama:") for m in MEMBERS), *JUDGES)


def answer(body: Any) -> str:
    """Answer T, F or something unreadable by the prompt's hash: the same on every node.

    Models other than ``MODEL`` hash their name too, so that consensus members disagree.
    """
    prompt = json.dumps((body or {}).get("messages"), sort_keys=True)
    model = str((body or {}).get("model"))
    if model != MODEL.removeprefix("ollama:"):
        prompt += model
    return ("T", "F", "I cannot say")[zlib.crc32(prompt.encode()) % 3]


@dataclass
class World:
    """The cluster, its nodes' stub servers, and a stub for the driver and local runs."""

    address: str
    nodes: tuple[OllamaStub, OllamaStub]
    local: OllamaStub
    env: dict[str, str]
    kg: Path
    gold: Path
    # The S3 endpoint every node's environment points at (None: s3fs or moto is absent).
    s3: Any = None

    def slow(self, seconds: float) -> None:
        for stub in self.nodes:
            stub.behaviour = replace(stub.behaviour, delay=seconds)


def _kg(folder: Path) -> tuple[Path, Path]:
    lines, gold = [], ["subject,predicate,object,label"]
    for n in range(FACTS):
        lines.append(f"<http://e.org/s{n}> <http://e.org/p{n % 4}> <http://e.org/o{n % 17}> .")
        gold.append(f"http://e.org/s{n},http://e.org/p{n % 4},http://e.org/o{n % 17},"
                    f"{'T' if n % 3 else 'F'}")
        if n % 6 == 0:
            lines.append(f'<http://e.org/s{n}> {LABEL} "Subject number {n}" .')
    # A name given far from its term, and a triple given twice: named, and checked once.
    lines.append(f'<http://e.org/o3> {LABEL} "Object three" .')
    lines.append("<http://e.org/s5> <http://e.org/p1> <http://e.org/o5> .")
    kg, labels = folder / "kg.nt", folder / "gold.csv"
    kg.write_text("\n".join(lines) + "\n")
    labels.write_text("\n".join(gold) + "\n")
    return kg, labels


def _s3_or_none(request: pytest.FixtureRequest) -> Any:
    try:
        return request.getfixturevalue("s3_endpoint")
    except pytest.skip.Exception:
        return None


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory,
          request: pytest.FixtureRequest) -> Iterator[World]:
    s3 = _s3_or_none(request)
    saved = dict(os.environ)
    # A cluster on loopback for these tests only: no token to hand around.
    os.environ.update({"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"})
    with ExitStack() as stack:
        nodes = tuple(stack.enter_context(OllamaStub(Behaviour(answer_by=answer),
                                                     models=STUB_MODELS))
                      for _ in range(2))
        local = stack.enter_context(OllamaStub(Behaviour(answer_by=answer), models=STUB_MODELS))
        common = {"PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "disabled",
                  **(s3.env if s3 is not None else {})}
        # The nodes take the machine's address (a driver connecting to 127.0.0.1 is sent
        # there by Ray); the model servers stay on loopback.
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "include_dashboard": False,
            "env_vars": {**common, "OLLAMA_HOST": nodes[0].url}})
        try:
            cluster.add_node(num_cpus=1, env_vars={**common, "OLLAMA_HOST": nodes[1].url})
            cluster.wait_for_nodes()
            kg, gold = _kg(tmp_path_factory.mktemp("kg"))
            env = {**os.environ, **common, "OLLAMA_HOST": local.url}
            yield World(str(cluster.address), nodes, local, env, kg, gold,  # type: ignore[arg-type]
                        s3)
        finally:
            cluster.shutdown()
            os.environ.clear()
            os.environ.update(saved)


def _cmd(world: World, out: Path, *extra: str, kg: Path | None = None,
         on_ray: bool = True, concurrency: int = 2, shard_mb: str = "0.002",
         gold: bool = True, cache: Path | None = None, progress: bool = False) -> list[str]:
    labels = ["--labels", str(world.gold)] if gold else []
    caching = ["--cache", str(cache)] if cache else ["--no-cache"]
    cmd = [sys.executable, "-m", "kgcheck.cli", "run", "--triples", str(kg or world.kg),
           *labels, "--model", MODEL, "--out", str(out), *caching, "--concurrency",
           str(concurrency), *([] if progress else ["--no-progress"]), *extra]
    if on_ray:
        # Shards of about 2 kB: the 10 kB file is cut in five or six.
        cmd += ["--engine", "ray", "--ray-address", world.address, "--ray-workers", "2",
                "--ray-shard-mb", shard_mb]
    return cmd


def _run(world: World, cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=world.env, capture_output=True, text=True,
                          timeout=timeout)


def _calls(stub: OllamaStub) -> int:
    return sum(1 for r in stub.calls() if r.path == "/api/chat")


@pytest.fixture(scope="module")
def twins(world: World, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """The same file checked by the local engine and by the pipeline; the servers' calls."""
    root = tmp_path_factory.mktemp("twins")
    # One fact at a time: both folders hold the verdicts in the input's order, which an
    # estimate's draw of a gold sample follows.
    # With --ci: the pipeline's intervals come from its shards' tallies.
    local = _run(world, _cmd(world, root / "local", "--ci", on_ray=False, concurrency=1))
    assert local.returncode == 0, local.stdout + local.stderr
    before = [_calls(s) for s in world.nodes]
    on_ray = _run(world, _cmd(world, root / "ray", "--ci", concurrency=1))
    assert on_ray.returncode == 0, on_ray.stdout + on_ray.stderr
    calls = {"nodes": [_calls(s) - b for s, b in zip(world.nodes, before, strict=True)],
             "local": _calls(world.local)}
    return root / "local", root / "ray", calls


def test_the_pipeline_gives_the_verdicts_and_summary_of_the_local_engine(
        twins: tuple[Path, Path, dict]) -> None:
    local, sharded, calls = twins
    a, b = read_verdicts(local), read_verdicts(sharded)
    assert len(a) == FACTS and a.keys() == b.keys()
    for fact_id, record in a.items():
        theirs = b[fact_id]
        for key in ("label", "raw", "gold", "names", "subject", "predicate", "object"):
            assert record.get(key) == theirs.get(key), (fact_id, key)
    assert {r["label"] for r in a.values()} == {"T", "F", "NA"}
    assert any(r.get("names") for r in a.values())
    assert not (sharded / "verdicts.jsonl").exists()
    done = sorted((sharded / SHARDS).glob("*.done"))
    assert len(done) == len(verdict_files(sharded)) >= 5
    summaries = [json.loads((f / "summary.json").read_text()) for f in (local, sharded)]
    assert {k: v for k, v in summaries[0].items() if k not in VOLATILE} == {
        k: v for k, v in summaries[1].items() if k not in VOLATILE}
    assert summaries[0]["scored"] == FACTS and summaries[1]["n"] == FACTS
    assert summaries[1]["engine"]["pipeline"] == "shards"
    assert summaries[1]["intervals"]["n"] == FACTS and "low" in summaries[1]["intervals"][
        "accuracy"]


def test_each_node_asks_its_own_model_server(twins: tuple[Path, Path, dict]) -> None:
    calls = twins[2]
    assert calls["local"] == FACTS, "the local run asks the driver's server, once per fact"
    assert all(n > 0 for n in calls["nodes"]), calls
    assert sum(calls["nodes"]) == FACTS, calls


def _rows(path: Path) -> list[dict[str, str]]:
    """An export's rows by fact id, without when (and in which run) each was checked."""
    with path.open(newline="", encoding="utf-8") as fh:
        return sorted(({k: v for k, v in row.items() if k not in ("checked_at", "run_id")}
                       for row in csv.DictReader(fh)), key=lambda r: r["fact_id"])


def test_report_export_and_estimate_read_the_sharded_run(world: World, tmp_path: Path,
                                                         twins: tuple[Path, Path, dict]
                                                         ) -> None:
    found: dict[str, dict[str, Any]] = {}
    for name, folder in zip(("local", "ray"), twins[:2], strict=False):
        copy = tmp_path / name / "run"
        shutil.copytree(folder, copy)
        for command in (["report", str(copy), "--out", str(tmp_path / name / "report"),
                         "--no-plots"],
                        ["export", str(copy), "--format", "csv", "--out",
                         str(tmp_path / name / "verdicts.csv")],
                        ["estimate", str(copy), "--gold-sample", "40", "--seed", "2",
                         "--no-plots"]):
            done = subprocess.run([sys.executable, "-m", "kgcheck.cli", *command], cwd=ROOT,
                                  env=world.env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
        tables = json.loads((tmp_path / name / "report" / "tables.json").read_text())
        estimate = json.loads((copy / "estimate.json").read_text())
        # What the checks cost in time is the runs' timing too.
        estimate["cost"] = {k: v for k, v in estimate["cost"].items() if "seconds" not in k}
        # The time table is the runs' timing; every other row must agree.
        found[name] = {"tables": [{k: v for k, v in row.items() if k != "source"}
                                  for row in tables if row["table"] != "time"],
                       "rows": _rows(tmp_path / name / "verdicts.csv"),
                       "estimate": {k: v for k, v in estimate.items() if k != "run"}}
    for part in ("tables", "rows", "estimate"):
        assert found["local"][part] and found["local"][part] == found["ray"][part], part
    assert len(found["ray"]["rows"]) == FACTS


def _check_pids() -> list[int]:
    """The Ray workers running a shard's check now (Ray titles them by their task)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if title.startswith(b"ray::_check"):
                pids.append(int(entry.name))
    return pids


def _wait_for_no_checks(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _check_pids() and time.monotonic() < deadline:
        time.sleep(0.2)


def _one_verdict_per_fact(folder: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for path in verdict_files(folder)
             for line in path.read_text().splitlines() if line.strip()]
    ids = [r["fact_id"] for r in lines]
    assert len(ids) == len(set(ids)) == FACTS
    return lines


def test_a_killed_worker_has_its_shard_run_again_without_a_repeat(world: World,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "run"
    world.slow(0.05)
    try:
        proc = subprocess.Popen(_cmd(world, out), cwd=ROOT, env=world.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 240
            while written_lines(out) < 10 or not _check_pids():
                assert proc.poll() is None, proc.communicate()[0]
                assert time.monotonic() < deadline, "no shard was being checked"
                time.sleep(0.05)
            os.kill(_check_pids()[0], signal.SIGKILL)
            output, _ = proc.communicate(timeout=300)
        finally:
            proc.kill()
    finally:
        world.slow(0.0)
    assert proc.returncode == 0, output
    lines = _one_verdict_per_fact(out)
    assert not [r for r in lines if r.get("error")], "a fact of the killed worker failed"
    assert json.loads((out / "summary.json").read_text())["n"] == FACTS


def test_a_driver_killed_with_kill_9_resumes_with_one_verdict_per_fact(world: World,
                                                                       tmp_path: Path) -> None:
    out = tmp_path / "run"
    world.slow(0.05)
    try:
        # Ray ends a dead driver's workers; the resume starts once they are gone.
        written = kill_and_resume(_cmd(world, out), out, after=20, total=FACTS, env=world.env,
                                  timeout=300, before_resume=_wait_for_no_checks)
    finally:
        world.slow(0.0)
    _one_verdict_per_fact(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == FACTS
    assert summary["ran_this_time"] <= FACTS - written


def test_a_malformed_line_fails_with_one_line_and_keeps_the_verdicts(
        world: World, tmp_path: Path, twins: tuple[Path, Path, dict]) -> None:
    lines = world.kg.read_text().splitlines()
    lines[120] = '<http://e.org/x> <http://e.org/p> "unclosed .'
    broken = tmp_path / "kg.nt"
    broken.write_text("\n".join(lines) + "\n")
    fresh = _run(world, _cmd(world, tmp_path / "run", kg=broken))
    said = [line for line in fresh.stderr.splitlines() if line.strip()]
    assert fresh.returncode == 2, fresh.stdout + fresh.stderr
    assert len(said) == 1 and f"{broken}, line 121: malformed N-Triples" in said[0], said
    assert "Traceback" not in fresh.stderr + fresh.stdout
    assert not (tmp_path / "run" / SHARDS).exists()
    # A finished run whose input broke since: the resume fails the same way, keeping all.
    run = tmp_path / "done"
    shutil.copytree(twins[1], run)
    shutil.copy(broken, world.kg.parent / "kg-broken.nt")
    kept = {p.name: p.read_bytes() for p in verdict_files(run)}
    again = _run(world, _cmd(world, run, "--resume", kg=world.kg.parent / "kg-broken.nt"))
    assert again.returncode == 2 and "line 121: malformed N-Triples" in again.stderr
    assert {p.name: p.read_bytes() for p in verdict_files(run)} == kept


def test_a_resume_goes_on_in_the_shards_the_run_was_cut_in(
        world: World, tmp_path: Path, twins: tuple[Path, Path, dict]) -> None:
    run = tmp_path / "run"
    shutil.copytree(twins[1], run)
    plan = (run / SHARDS / "plan.json").read_text()
    # Shard 2 as a killed worker leaves it: no marker, two verdicts and a torn line.
    (run / SHARDS / "00002.done").unlink()
    shard = run / SHARDS / "00002.jsonl"
    kept = shard.read_text().splitlines()[:2]
    shard.write_text("\n".join(kept) + '\n{"fact_id": "x", "la')
    before = [_calls(s) for s in world.nodes]
    # Another shard size asked: the run goes on in its own shards.
    done = _run(world, _cmd(world, run, "--resume", shard_mb="0.004"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (run / SHARDS / "plan.json").read_text() == plan
    assert shard.read_text().splitlines()[:2] == kept
    _one_verdict_per_fact(run)
    asked = sum(_calls(s) - b for s, b in zip(world.nodes, before, strict=True))
    summary = json.loads((run / "summary.json").read_text())
    assert asked == summary["ran_this_time"] == len(shard.read_text().splitlines()) - 2
    assert summary["n"] == FACTS


def test_the_workers_write_their_shards_to_a_uri_and_the_folder_reads_them(
        world: World, tmp_path: Path, twins: tuple[Path, Path, dict],
        monkeypatch: pytest.MonkeyPatch) -> None:
    if world.s3 is None:
        pytest.skip("shards at a URI need s3fs and moto[server]: pip install 'kgcheck[s3]' "
                    "'moto[server]'")
    for name, value in world.s3.env.items():  # this process reads the shards too
        monkeypatch.setenv(name, value)
    world.s3.fs().clear_instance_cache()
    out, uri = tmp_path / "run", world.s3.uri(f"{tmp_path.name}/shards")
    done = _run(world, _cmd(world, out, "--shards-uri", uri, "--ci", concurrency=1))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"verdicts: {uri}" in done.stdout
    bucket = world.s3.fs()
    held = sorted(p.rpartition("/")[2] for p in bucket.ls(uri.removeprefix("s3://")))
    jsonl = [n for n in held if n.endswith(".jsonl")]
    assert len(jsonl) >= 5 and [n.replace(".jsonl", ".done") for n in jsonl] == [
        n for n in held if n.endswith(".done")]
    # The driver wrote no verdict: its folder holds the plan and the summary only.
    assert not list((out / SHARDS).glob("*.jsonl"))
    summaries = [json.loads((f / "summary.json").read_text()) for f in (twins[0], out)]
    assert {k: v for k, v in summaries[0].items() if k not in VOLATILE} == {
        k: v for k, v in summaries[1].items() if k not in VOLATILE}
    # Readers copy the shards from the store, then read them as a local sharded run's.
    a, b = read_verdicts(twins[0]), read_verdicts(out)
    assert a.keys() == b.keys() and len(b) == FACTS
    assert all(a[k]["label"] == b[k]["label"] and a[k]["raw"] == b[k]["raw"] for k in a)
    assert len(list((out / SHARDS).glob("*.jsonl"))) == len(jsonl)
    exported = subprocess.run([sys.executable, "-m", "kgcheck.cli", "export", str(out),
                               "--format", "csv", "--out", str(tmp_path / "verdicts.csv")],
                              cwd=ROOT, env=world.env, capture_output=True, text=True,
                              timeout=300)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert len(_rows(tmp_path / "verdicts.csv")) == FACTS

    # Shard 1 as a killed worker leaves it in the store: no marker, two verdicts, a torn
    # line. A resume (the store comes from the plan) checks only its missing facts.
    key = f"{uri.removeprefix('s3://')}/00001"
    kept = bucket.cat_file(f"{key}.jsonl").decode().splitlines()[:2]
    bucket.pipe_file(f"{key}.jsonl", ("\n".join(kept) + '\n{"fact_id": "x", "la').encode())
    bucket.rm_file(f"{key}.done")
    before = [_calls(s) for s in world.nodes]
    again = _run(world, _cmd(world, out, "--resume", concurrency=1))
    assert again.returncode == 0, again.stdout + again.stderr
    asked = sum(_calls(s) - b for s, b in zip(world.nodes, before, strict=True))
    shard = world.s3.fs().cat_file(f"{key}.jsonl").decode().splitlines()
    assert shard[:2] == kept and asked == len(shard) - 2 > 0
    assert world.s3.fs().exists(f"{key}.done")
    _one_verdict_per_fact(out)
    assert json.loads((out / "summary.json").read_text())["n"] == FACTS


def test_the_input_is_read_from_a_url_by_range_as_the_local_file_is_read(
        world: World, tmp_path: Path, twins: tuple[Path, Path, dict],
        monkeypatch: pytest.MonkeyPatch) -> None:
    if world.s3 is None:
        pytest.skip("an input at a URL needs s3fs and moto[server]: pip install 'kgcheck[s3]' "
                    "'moto[server]'")
    for name, value in world.s3.env.items():
        monkeypatch.setenv(name, value)
    bucket = world.s3.fs()
    # The input is in the bucket only: no node has a copy of it.
    key = f"{world.s3.bucket}/{tmp_path.name}/input/kg.nt"
    bucket.pipe_file(key, world.kg.read_bytes())
    uri = f"s3://{key}"
    out = tmp_path / "run"

    def at_url(*extra: str) -> list[str]:
        cmd = _cmd(world, out, *extra, concurrency=1)
        cmd[cmd.index("--triples") + 1] = uri
        return cmd

    done = _run(world, at_url("--ci"))
    assert done.returncode == 0, done.stdout + done.stderr
    a, b = read_verdicts(twins[0]), read_verdicts(out)
    assert a.keys() == b.keys() and len(b) == FACTS
    for fact_id, record in a.items():
        for field in ("label", "raw", "gold", "names", "subject", "predicate", "object"):
            assert record.get(field) == b[fact_id].get(field), (fact_id, field)
    summaries = [json.loads((f / "summary.json").read_text()) for f in (twins[0], out)]
    assert {k: v for k, v in summaries[0].items() if k not in VOLATILE} == {
        k: v for k, v in summaries[1].items() if k not in VOLATILE}
    plan = json.loads((out / SHARDS / "plan.json").read_text())
    local_plan = json.loads((twins[1] / SHARDS / "plan.json").read_text())
    assert plan["input"] == uri and plan["shards"] == local_plan["shards"]
    info = json.loads((out / "run.json").read_text())
    assert info["source"] == uri
    assert info["input"]["digest"] == json.loads(
        (twins[1] / "run.json").read_text())["input"]["digest"]

    # The object replaced by one with another fact: a resume is refused, the run kept.
    kept = {p.name: p.read_bytes() for p in verdict_files(out)}
    bucket.pipe_file(key, world.kg.read_bytes().replace(b"<http://e.org/o3> .",
                                                        b"<http://e.org/o4> .", 1))
    again = _run(world, at_url("--resume"))
    said = [line for line in again.stderr.splitlines() if line.startswith("error:")]
    assert again.returncode == 2, again.stdout + again.stderr
    assert len(said) == 1 and "the input facts (their count or content)" in said[0], said
    assert "Traceback" not in again.stderr
    assert {p.name: p.read_bytes() for p in verdict_files(out)} == kept

    # A malformed line in the object: one line naming the URL and the line.
    lines = world.kg.read_text().splitlines()
    lines[120] = '<http://e.org/x> <http://e.org/p> "unclosed .'
    bucket.pipe_file(key, ("\n".join(lines) + "\n").encode())
    out = tmp_path / "broken"
    broken = _run(world, at_url())
    said = [line for line in broken.stderr.splitlines() if line.strip()]
    assert broken.returncode == 2, broken.stdout + broken.stderr
    assert len(said) == 1 and f"{uri}, line 121: malformed N-Triples" in said[0], said

    # A missing object: one line naming the URL, before the cluster is asked anything.
    out = tmp_path / "missing"
    uri = f"s3://{world.s3.bucket}/{tmp_path.name}/input/none.nt"
    missing = _run(world, at_url())
    said = [line for line in missing.stderr.splitlines() if line.strip()]
    assert missing.returncode == 2 and len(said) == 1, missing.stdout + missing.stderr
    assert f"{uri}: file not found" in said[0], said


def test_the_prefilter_runs_on_the_workers_as_it_runs_locally(world: World,
                                                              tmp_path: Path) -> None:
    pytest.importorskip("rdflib", reason="the schema rules need pip install 'kgcheck[rules]'")
    from tests.integration.test_schema_rules import KG_LINES, ONTOLOGY

    onto, kg = tmp_path / "onto.ttl", tmp_path / "kg.nt"
    onto.write_text(ONTOLOGY)
    kg.write_text("\n".join(KG_LINES) + "\n")
    # Relative paths, run from another folder than the workers': they get absolute ones.
    rules = ["--prefilter", "schema", "--ontology", "onto.ttl"]
    folders, asked = {}, {}
    for name, on_ray in (("local", False), ("ray", True)):
        before = [_calls(s) for s in (*world.nodes, world.local)]
        cmd = _cmd(world, tmp_path / name, *rules, kg=Path("kg.nt"), on_ray=on_ray,
                   concurrency=1, shard_mb="0.0005", gold=False)
        done = subprocess.run(cmd, cwd=tmp_path, env=world.env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        folders[name] = read_verdicts(tmp_path / name)
        asked[name] = sum(_calls(s) - b for s, b in zip((*world.nodes, world.local), before,
                                                       strict=True))
    summaries = [json.loads((tmp_path / n / "summary.json").read_text())
                 for n in ("local", "ray")]
    assert summaries[1]["engine"]["pipeline"] == "shards"
    assert summaries[0]["prefilter"] == summaries[1]["prefilter"]
    refuted = summaries[1]["prefilter"]["refuted"]
    assert refuted > 0 and asked["ray"] == asked["local"] == len(KG_LINES) - refuted
    assert {k: (r["label"], (r.get("details") or {}).get("prefilter"))
            for k, r in folders["local"].items()} == {
        k: (r["label"], (r.get("details") or {}).get("prefilter"))
        for k, r in folders["ray"].items()}


class _Flipper:
    """Answer by the prompt's hash, some facts otherwise at every other time they are asked.

    Shared by every stub (the nodes' and the driver's): a fact's answer depends on how often
    its prompt was asked before, on whichever node, so repeat ``i`` of a fact gets the same
    answer from the local engine and from the pipeline, and a repeat asked again (a resume)
    gets its own answer again (it is asked for an odd or even time as before).
    """

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, body: Any) -> str:
        prompt = json.dumps((body or {}).get("messages"), sort_keys=True)
        with self.lock:
            times = self.seen.get(prompt, 0)
            self.seen[prompt] = times + 1
        digest = zlib.crc32(prompt.encode())
        flip = times % 2 == 1 and digest % 5 < 2
        return ("T", "F", "I cannot say")[(digest + flip) % 3]


@contextmanager
def _flipping(world: World) -> Iterator[_Flipper]:
    flipper = _Flipper()
    stubs = (*world.nodes, world.local)
    saved = [s.behaviour for s in stubs]
    for stub in stubs:
        stub.behaviour = replace(stub.behaviour, answer_by=flipper)
    try:
        yield flipper
    finally:
        for stub, behaviour in zip(stubs, saved, strict=True):
            stub.behaviour = behaviour


def _stable(record: dict[str, Any]) -> dict[str, Any]:
    """A verdict record without when, how fast and in which run it was made."""
    return {k: v for k, v in record.items() if k not in ("checked_at", "run_id", "seconds")}


def test_repeats_on_the_pipeline_give_the_local_engines_majority_and_summary(
        world: World, tmp_path: Path) -> None:
    # A small file (about 40 facts) cut in a few shards: three passes and a combine.
    lines = world.kg.read_text().splitlines()
    kg = tmp_path / "small.nt"
    kg.write_text("\n".join(lines[:44] + lines[-1:]) + "\n")
    folders = {"local": tmp_path / "local", "ray": tmp_path / "ray"}
    with _flipping(world) as flipper:
        for name, on_ray in (("local", False), ("ray", True)):
            flipper.seen.clear()
            before = [_calls(s) for s in world.nodes]
            # The pipeline's run keeps a (new) answer cache (each repeat asks anew) and shows
            # its progress (printed once at the end where the output is not a terminal).
            cache = tmp_path / "answers.sqlite" if on_ray else None
            done = _run(world, _cmd(world, folders[name], "--repeats", "3", "--ci", kg=kg,
                                    on_ray=on_ray, concurrency=1, shard_mb="0.0008",
                                    cache=cache, progress=on_ray))
            assert done.returncode == 0, done.stdout + done.stderr
        ray_calls = sum(_calls(s) - n for s, n in zip(world.nodes, before, strict=True))
        a, b = read_verdicts(folders["local"]), read_verdicts(folders["ray"])
        assert len(a) >= 35 and a.keys() == b.keys()
        assert {k: _stable(r) for k, r in a.items()} == {k: _stable(r) for k, r in b.items()}
        summaries = [json.loads((f / "summary.json").read_text()) for f in folders.values()]
        assert {k: v for k, v in summaries[0].items() if k not in VOLATILE} == {
            k: v for k, v in summaries[1].items() if k not in VOLATILE}
        section = summaries[1]["repeats"]
        assert section["count"] == 3 and 0 < section["flipped_facts"] < len(a)
        assert summaries[1]["engine"]["pipeline"] == "shards"
        # The cache counts every repeat's calls, not the last repeat's alone.
        assert summaries[1]["cache"]["hits"] == 0
        assert summaries[1]["cache"]["misses"] == ray_calls == 3 * len(a)
        # OUT is a sharded run: one marker per combined shard, no verdicts.jsonl.
        out = folders["ray"]
        assert not (out / "verdicts.jsonl").exists()
        shards = sorted((out / SHARDS).glob("*.jsonl"))
        assert len(shards) >= 3 and len(list((out / SHARDS).glob("*.done"))) == len(shards)
        assert f"combining 3 repeats ━━━━━━━━ {len(shards)}/{len(shards)} shards" in done.stdout
        assert all(len(list((out / "repeats" / str(n) / SHARDS).glob("*.done"))) == len(shards)
                   for n in (1, 2, 3))
        for command in (["export", str(out), "--format", "csv", "--out",
                         str(tmp_path / "ray.csv")],
                        ["report", str(out), "--out", str(tmp_path / "report"), "--no-plots"]):
            read = subprocess.run([sys.executable, "-m", "kgcheck.cli", *command], cwd=ROOT,
                                  env=world.env, capture_output=True, text=True, timeout=300)
            assert read.returncode == 0, read.stdout + read.stderr
        assert {r["fact_id"]: r["verdict"] for r in _rows(tmp_path / "ray.csv")} == {
            k: r["label"] for k, r in a.items()}
        tables = (tmp_path / "report" / "tables.md").read_text().split("## Repeats")[1]
        assert f"| {section['flipped_facts']} of {len(a)} |" in tables.split("\n## ")[0]

        # Repeat 2's shard 1 as a killed worker leaves it: no marker, two verdicts and a
        # torn line. A resume checks only its missing facts and combines shard 1 again;
        # the other combined shards are left as they are.
        repeat = out / "repeats" / "2" / SHARDS
        (repeat / "00001.done").unlink()
        kept = (repeat / "00001.jsonl").read_text().splitlines()[:2]
        (repeat / "00001.jsonl").write_text("\n".join(kept) + '\n{"fact_id": "x", "la')
        untouched = {p.name: p.stat().st_mtime_ns for p in shards if p.name != "00001.jsonl"}
        before = [_calls(s) for s in world.nodes]
        again = _run(world, _cmd(world, out, "--repeats", "3", "--ci", "--resume", kg=kg,
                                 concurrency=1, shard_mb="0.0008"))
        assert again.returncode == 0, again.stdout + again.stderr
        asked = sum(_calls(s) - n for s, n in zip(world.nodes, before, strict=True))
        assert asked == len((repeat / "00001.jsonl").read_text().splitlines()) - 2 > 0
        assert {p.name: p.stat().st_mtime_ns for p in shards
                if p.name != "00001.jsonl"} == untouched
        assert {k: _stable(r) for k, r in read_verdicts(out).items()} == {
            k: _stable(r) for k, r in a.items()}
        resumed = json.loads((out / "summary.json").read_text())
        assert resumed["repeats"] == summaries[0]["repeats"]
        assert resumed["ran_this_time"] == asked


# Facts of the consensus runs: the first few of the file (with their names), in 4-5 shards.
CONSENSUS_FACTS = 36
CONSENSUS_SHARD_MB = "0.0006"


def _small_kg(world: World, folder: Path) -> Path:
    kept = {f"<http://e.org/s{n}>" for n in range(CONSENSUS_FACTS)} | {"<http://e.org/o3>"}
    small = folder / "small.nt"
    small.write_text("\n".join(line for line in world.kg.read_text().splitlines()
                               if line.split(" ", 1)[0] in kept) + "\n")
    return small


def _consensus_cmd(world: World, kg: Path, out: Path, judge: str, *extra: str,
                   on_ray: bool = True) -> list[str]:
    return _cmd(world, out, "--consensus", ",".join(MEMBERS), "--judge", judge, *extra,
                kg=kg, on_ray=on_ray, shard_mb=CONSENSUS_SHARD_MB)


def _all_calls(world: World) -> int:
    return sum(_calls(s) for s in world.nodes)


@pytest.fixture(scope="module")
def consensus_twins(world: World, tmp_path_factory: pytest.TempPathFactory
                    ) -> dict[str, tuple[Path, Path, list[int]]]:
    """Consensus by the local engine and by the pipeline: a fixed judge and a measured one.

    Each gives the two folders and the calls the pipeline's run made of each node's server.
    """
    root = tmp_path_factory.mktemp("consensus")
    kg = _small_kg(world, root)
    found = {}
    for name, judge in (("fixed", f"ollama:{JUDGES[0]}"), ("measured", "cons-up")):
        folders = root / f"{name}-local", root / f"{name}-ray"
        for folder, on_ray in zip(folders, (False, True), strict=True):
            before = [_calls(s) for s in world.nodes]
            done = _run(world, _consensus_cmd(world, kg, folder, judge, on_ray=on_ray))
            assert done.returncode == 0, done.stdout + done.stderr
        found[name] = (*folders, [_calls(s) - b for s, b in zip(world.nodes, before,
                                                                  strict=True)])
    return found


def _same_summaries(a: Path, b: Path) -> dict[str, Any]:
    summaries = [json.loads((f / "summary.json").read_text()) for f in (a, b)]
    # The votes phase's folder and timing are where and when it ran.
    volatile = VOLATILE | {"votes_phase"}
    assert {k: v for k, v in summaries[0].items() if k not in volatile} == {
        k: v for k, v in summaries[1].items() if k not in volatile}
    return summaries[1]


@pytest.mark.parametrize("judge", ["fixed", "measured"])
def test_consensus_on_the_pipeline_gives_the_local_engines_verdicts_and_summary(
        consensus_twins: dict[str, tuple[Path, Path, list[int]]], judge: str) -> None:
    local, sharded, asked = consensus_twins[judge]
    a, b = read_verdicts(local), read_verdicts(sharded)
    assert len(a) == CONSENSUS_FACTS and a.keys() == b.keys()
    for fact_id, record in a.items():
        for key in ("label", "gold", "names", "subject"):
            assert record.get(key) == b[fact_id].get(key), (fact_id, key)
        assert [(v["model"], v["label"], v["raw"]) for v in record["details"]["votes"]] == [
            (v["model"], v["label"], v["raw"]) for v in b[fact_id]["details"]["votes"]], fact_id
        assert record["details"].get("judge_called") == b[fact_id]["details"].get(
            "judge_called"), fact_id
    assert not (sharded / "verdicts.jsonl").exists()
    assert len(list((sharded / SHARDS).glob("*.done"))) >= 4
    summary = _same_summaries(local, sharded)
    assert summary["engine"]["pipeline"] == "shards"
    # Both nodes' servers answered; each member voted once per fact, the judge once per tie
    # (a measured judge's second pass starts from the recorded votes).
    assert all(n > 0 for n in asked)
    assert sum(asked) == len(MEMBERS) * CONSENSUS_FACTS + summary["judge_calls"]
    assert summary["ties"] > 0 and summary["judge_calls"] == summary["ties"]
    assert set(summary["alignment"]) == set(MEMBERS)
    assert all(s["votes"] == CONSENSUS_FACTS for s in summary["member_scores"].values())
    if judge == "measured":
        # The members voted once, in the votes folder's own shards; the judge saw only ties.
        assert summary["judge_source"] == "measured"
        assert summary["judge_model"] in {f"ollama:{j}" for j in JUDGES}
        votes = [r for path in verdict_files(sharded / "votes") for r in
                 map(json.loads, path.read_text().splitlines())]
        assert len(votes) == CONSENSUS_FACTS and not (sharded / "votes" / "verdicts.jsonl"
                                                     ).exists()
        _same_summaries(local / "votes", sharded / "votes")


def _cut_shard(shard: Path, keep: int = 2) -> list[str]:
    """Leave a shard as a killed worker does: no marker, a few verdicts and a torn line."""
    shard.with_suffix(".done").unlink()
    kept = shard.read_text().splitlines()[:keep]
    shard.write_text("\n".join(kept) + '\n{"fact_id": "x", "la')
    return kept


@pytest.mark.parametrize("judge", ["fixed", "measured"])
def test_a_consensus_resume_asks_only_the_facts_of_a_partial_shard(
        world: World, tmp_path: Path, consensus_twins: dict[str, tuple[Path, Path, list[int]]],
        judge: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(consensus_twins[judge][1], run)
    # The fixed judge's run: shard 1 of its one pass; the measured: shard 1 of the votes.
    folder = run if judge == "fixed" else run / "votes"
    shard = folder / SHARDS / "00001.jsonl"
    whole = shard.read_text().splitlines()
    kept = _cut_shard(shard)
    missing = [json.loads(line) for line in whole[len(kept):]]
    assert missing
    before = _all_calls(world)
    kg = consensus_twins[judge][1].parent / "small.nt"
    done = _run(world, _consensus_cmd(world, kg, run, "ollama:" + JUDGES[0] if judge == "fixed"
                                      else "cons-up", "--resume"))
    assert done.returncode == 0, done.stdout + done.stderr
    asked = _all_calls(world) - before
    # Each missing fact asks its members once (and, in a one-pass run, the judge on a tie).
    judged = sum(1 for r in missing if r["details"].get("judge_called")) if judge == "fixed" \
        else 0
    assert asked == len(MEMBERS) * len(missing) + judged
    assert shard.read_text().splitlines()[:2] == kept
    assert read_verdicts(folder).keys() == read_verdicts(consensus_twins[judge][1] / (
        "" if judge == "fixed" else "votes")).keys()
    _same_summaries(consensus_twins[judge][1], run)
