"""The Ray engine on a real local cluster (``ray start --head`` on 127.0.0.1, 2 CPUs).

The same run as the local engine, the same folder, the same guarantees: identical verdicts,
a killed worker restarted with its facts retried, a killed driver resumed exactly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgcheck.data.runfolder import read_verdicts
from kgcheck.runs import ray_engine
from kgcheck.runs.engines import make_engine

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "disabled",
       "RAY_USAGE_STATS_ENABLED": "0"}

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if ray_engine.ray is None or not RAY.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("Ray is not installed in CI: the test extra must install it")
        pytest.skip("Ray is not installed: pip install 'kgcheck[ray]'")
    port = _free_port()
    temp = tmp_path_factory.mktemp("ray")
    started = subprocess.run(
        [str(RAY), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
         f"--temp-dir={temp}"], env=ENV, capture_output=True, text=True, timeout=240)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([str(RAY), "stop", "--force"], env=ENV, capture_output=True,
                       timeout=120)


def _run(out: Path, *extra: str, limit: int = 40) -> list[str]:
    return [sys.executable, "-m", "kgcheck.cli", "run", "--dataset", "yago", "--limit",
            str(limit), "--out", str(out), "--no-progress", *extra]


def _ray(address: str, workers: int = 2) -> list[str]:
    return ["--engine", "ray", "--ray-address", address, "--ray-workers", str(workers)]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _worker_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "GraphWorker" in cmdline:
            pids.append(int(entry.name))
    return pids


def _wait_for(verdicts: Path, count: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if verdicts.exists() and len(verdicts.read_text().splitlines()) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} verdicts after {timeout} s")


def test_ray_gives_the_verdicts_the_local_engine_gives(cluster: str, tmp_path: Path) -> None:
    local = subprocess.run(_run(tmp_path / "local"), cwd=ROOT, env=ENV, capture_output=True,
                           text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    on_ray = subprocess.run(_run(tmp_path / "ray", *_ray(cluster)), cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=300)
    assert on_ray.returncode == 0, on_ray.stderr
    a = read_verdicts(tmp_path / "local" / "verdicts.jsonl")
    b = read_verdicts(tmp_path / "ray" / "verdicts.jsonl")
    assert a.keys() == b.keys() and len(a) == 40
    for fact_id in a:
        assert (a[fact_id]["label"], a[fact_id]["raw"]) == (b[fact_id]["label"],
                                                            b[fact_id]["raw"])
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["engine"] == {"name": "ray", "workers": 2, "per_worker": 8}, \
        "a --limit run reads its first facts in one pass, not in shards"
    assert summary["f1_true"] == json.loads(
        (tmp_path / "local" / "summary.json").read_text())["f1_true"]


def _yago_jsonl(path: Path, count: int = 40, broken_line: int | None = None) -> Path:
    import kgcheck

    rows = [json.dumps({"id": f.id, "subject": f.subject, "predicate": f.predicate,
                        "object": f.object}) for f in kgcheck.load_dataset("yago")[:count]]
    if broken_line is not None:
        rows[broken_line - 1] = '{"id": "x", "subject": "A", '
    path.write_text("\n".join(rows) + "\n")
    return path


def test_ray_reads_an_input_file_in_parallel_shards_into_the_same_verdicts(
        cluster: str, tmp_path: Path) -> None:
    source = _yago_jsonl(tmp_path / "yago.jsonl")
    args = ["--triples", str(source), "--as-dataset", "yago", "--no-progress"]
    local = subprocess.run([sys.executable, "-m", "kgcheck.cli", "run", *args, "--out",
                            str(tmp_path / "local")], cwd=ROOT, env=ENV, capture_output=True,
                           text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    # Shards of about 1 kB: the 4 kB file is cut in four or five.
    on_ray = subprocess.run([sys.executable, "-m", "kgcheck.cli", "run", *args, "--out",
                             str(tmp_path / "ray"), *_ray(cluster), "--ray-shard-mb", "0.001"],
                            cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert on_ray.returncode == 0, on_ray.stderr
    # A whole file on Ray: the workers check their shards into shards/NNNNN.jsonl.
    a = read_verdicts(tmp_path / "local")
    b = read_verdicts(tmp_path / "ray")
    assert len(a) == 40 and {k: v["label"] for k, v in a.items()} == {
        k: v["label"] for k, v in b.items()}
    assert not (tmp_path / "ray" / "verdicts.jsonl").exists()
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["engine"]["input_shards"] >= 4
    assert summary["engine"]["pipeline"] == "shards"
    assert "input_shards" not in json.loads(
        (tmp_path / "local" / "summary.json").read_text())["engine"]


def test_a_malformed_line_in_a_shard_is_named_with_its_line_of_the_file(
        cluster: str, tmp_path: Path) -> None:
    source = _yago_jsonl(tmp_path / "yago.jsonl", broken_line=35)
    done = subprocess.run([sys.executable, "-m", "kgcheck.cli", "run", "--triples",
                           str(source), "--as-dataset", "yago", "--no-progress", "--out",
                           str(tmp_path / "run"), *_ray(cluster), "--ray-shard-mb", "0.001"],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert f"{source}, line 35: malformed JSON" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "verdicts.jsonl").exists()
    assert not (tmp_path / "run" / "shards").exists()


def test_a_killed_worker_is_restarted_and_no_fact_is_lost(cluster: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = _run(out, *_ray(cluster), "--replay-latency", "1", "--concurrency", "4", limit=120)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(out / "verdicts.jsonl", 10)
        pids = _worker_pids()
        assert pids, "no worker process found"
        os.kill(pids[0], signal.SIGKILL)
        output, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    lines = _lines(out / "verdicts.jsonl")
    ids = [r["fact_id"] for r in lines]
    assert len(ids) == len(set(ids)) == 120
    assert not [r for r in lines if r.get("error")], "a fact of the killed worker failed"


def test_a_killed_driver_resumes_with_exactly_one_verdict_per_fact(cluster: str,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = _run(out, *_ray(cluster), "--replay-latency", "1", "--concurrency", "4", limit=120)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_for(out / "verdicts.jsonl", 15)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    written = len(read_verdicts(out / "verdicts.jsonl"))
    assert 15 <= written < 120, "the driver should have been killed part way"
    done = subprocess.run(cmd + ["--resume"], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ids = [r["fact_id"] for r in _lines(out / "verdicts.jsonl")]
    assert len(ids) == len(set(ids)) == 120


def test_an_unreachable_cluster_fails_before_any_fact(tmp_path: Path) -> None:
    port = _free_port()
    done = subprocess.run(_run(tmp_path / "run", "--engine", "ray", "--ray-address",
                               f"127.0.0.1:{port}"), cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "verdicts.jsonl").exists()


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_engine, "ray", None)
    with pytest.raises(ray_engine.RayEngineError, match=r"pip install 'kgcheck\[ray\]'"):
        make_engine("ray")


def test_ray_flags_need_the_ray_engine(tmp_path: Path) -> None:
    done = subprocess.run(_run(tmp_path / "run", "--ray-workers", "2"), cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "need --engine ray" in done.stderr
    unknown = subprocess.run(_run(tmp_path / "run", "--engine", "spark"), cwd=ROOT, env=ENV,
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2 and "unknown engine 'spark'; known: local, ray" in \
        unknown.stderr
