"""Edge cases of the command line: a taken port, an unknown graph, a missing benchmark corpus."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.cli.commands.search_api import ServeError, bind_sockets

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture
def taken_port():
    """A port on 127.0.0.1 that a socket listens on for the whole test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_search_api_on_a_taken_port_says_so_in_one_line(taken_port: int) -> None:
    result = runner.invoke(app, ["search-api", "--port", str(taken_port)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: cannot serve on 127.0.0.1:{taken_port}: address already in use")
    assert result.stdout == ""  # no "mock search API on ..." line before the error


def test_bind_sockets_binds_a_free_port_and_refuses_a_taken_one(taken_port: int) -> None:
    sockets = bind_sockets("127.0.0.1", 0)
    try:
        assert len(sockets) == 1
        host, port = sockets[0].getsockname()
        assert host == "127.0.0.1" and port > 0
    finally:
        for sock in sockets:
            sock.close()
    with pytest.raises(ServeError, match=rf"127\.0\.0\.1:{taken_port}: address already in use"):
        bind_sockets("127.0.0.1", taken_port)


def test_search_api_port_must_be_a_tcp_port() -> None:
    result = runner.invoke(app, ["search-api", "--port", "70000"])
    assert result.exit_code == 2
    assert "--port" in result.output


@pytest.mark.parametrize("options", [[], ["--format", "bogus"], ["--format", "png"],
                                     ["--out", "OUT"], ["--format", "svg", "--out", "OUT"]])
def test_graph_draw_reports_an_unknown_graph_first(options: list[str], tmp_path: Path) -> None:
    out = tmp_path / "picture.txt"
    args = [str(out) if option == "OUT" else option for option in options]
    result = runner.invoke(app, ["graph", "draw", "nope", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown graph 'nope'; known: ")
    assert "dka" in result.stderr and "--format" not in result.stderr
    assert not out.exists()


def test_graph_docs_checks_every_name_before_drawing(tmp_path: Path) -> None:
    out = tmp_path / "pictures"
    result = runner.invoke(app, ["graph", "docs", "--out-dir", str(out),
                                 "--name", "dka", "--name", "nope"])
    assert result.exit_code == 2
    assert "unknown graph 'nope'" in result.stderr
    assert not out.exists()


BENCHMARKS = ["bench_rag_index.py", "bench_rag_quality.py", "bench_rag_run.py"]


@pytest.mark.parametrize("script", BENCHMARKS)
def test_rag_benchmark_without_its_corpus_stops_with_one_line(script: str,
                                                              tmp_path: Path) -> None:
    missing = tmp_path / "absent" / "rag_dataset-yago.tar.gz"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script),
                             "--corpus", str(missing)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert str(missing) in lines[0] and "--corpus" in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("script", BENCHMARKS)
def test_rag_benchmark_help_names_the_corpus_option(script: str) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--help"],
                            capture_output=True, text=True, timeout=60, check=False,
                            env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0
    assert "--corpus PATH" in result.stdout and "rag_dataset-yago.tar.gz" in result.stdout
