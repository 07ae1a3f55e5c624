"""Scripts and commands end without unclosed HTTP clients, and kgcheck's warnings are one line.

A model server stub runs as a process of its own on 127.0.0.1. A script using the Python
API, ``kgcheck run`` and ``kgcheck errors`` run in subprocesses with ResourceWarning shown
always (and the garbage collector forced in the script): nothing may be reported unclosed.
A warning of kgcheck's reads ``kgcheck: warning: <message>`` on one line; others' warnings
keep Python's format.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stubs.process import start_stub_process

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
KGCHECK = Path(sys.executable).parent / "kgcheck"


@pytest.fixture(scope="module")
def ollama() -> Iterator[str]:
    # Every answer F: YAGO's first facts are true, so the run has errors to analyse.
    process, url = start_stub_process("tests.stubs", "ollama", "--answer", "F")
    try:
        yield url
    finally:
        process.kill()
        process.wait(timeout=10)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "PYTHONWARNINGS", "OLLAMA_"))}
    env.update({"PYTHONWARNINGS": "always::ResourceWarning",
                "KGCHECK_HOME": str(tmp_path / "home"),
                "KGCHECK_CACHE_DIR": str(tmp_path / "cache"), **extra})
    return env


def _no_unclosed(stderr: str) -> None:
    assert "unclosed" not in stderr.lower(), stderr[-3000:]


def test_a_script_closes_its_clients_and_warns_in_one_line(ollama: str, tmp_path: Path) -> None:
    corrupt = tmp_path / "answers.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    script = textwrap.dedent(f"""
        import gc
        import kgcheck

        facts = kgcheck.load_dataset("yago")[:3]
        for _ in range(2):  # a second run in the same process, on a loop of its own
            verdicts = kgcheck.check(facts, strategy="dka", model="ollama:gemma2:9b",
                                     base_url={ollama!r}, cache={str(corrupt)!r})
            gc.collect()
        print([v.label for v in verdicts])
    """)
    ran = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip() == "['F', 'F', 'F']"
    _no_unclosed(ran.stderr)
    # The answer cache's warning, in kgcheck's words alone: no file, line or category.
    lines = ran.stderr.splitlines()
    assert lines and all(line.startswith("kgcheck: warning: answer cache ") for line in lines), \
        ran.stderr[-3000:]
    assert "not a readable cache" in lines[0]


def test_kgcheck_warnings_are_one_line_and_others_keep_their_format(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import warnings
        import kgcheck

        warnings.warn("no label matches a chosen fact", kgcheck.KgcheckWarning)
        warnings.warn("some other package's warning", UserWarning)
    """)
    ran = subprocess.run([sys.executable, "-c", script], cwd=tmp_path,
                         env=_env(tmp_path, PYTHONWARNINGS="default"),
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.splitlines()
    assert lines[0] == "kgcheck: warning: no label matches a chosen fact"
    assert "UserWarning: some other package's warning" in lines[1]


def test_the_cli_run_and_errors_close_their_clients(ollama: str, tmp_path: Path) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "errors"
    ran = subprocess.run(
        [str(KGCHECK), "run", "--dataset", "yago", "--limit", "8", "--strategy", "dka",
         "--model", "ollama:gemma2:9b", "--base-url", ollama, "--out", str(run_dir),
         "--no-progress", "--no-cache"],
        cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert ran.returncode == 0, ran.stderr[-3000:]
    _no_unclosed(ran.stderr)
    # The errors are explained by the run's own model, found through OLLAMA_HOST.
    explained = subprocess.run(
        [str(KGCHECK), "errors", str(run_dir), "--out", str(out), "--min-cluster-size", "2"],
        cwd=tmp_path, env=_env(tmp_path, OLLAMA_HOST=ollama), capture_output=True, text=True,
        timeout=300)
    assert explained.returncode == 0, explained.stderr[-3000:]
    assert (out / "errors.jsonl").is_file()
    _no_unclosed(explained.stderr)
