"""``kgcheck graph draw``: PNG, SVG and Mermaid pictures of the graphs, made offline."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner
from typing_extensions import TypedDict

from kgcheck.cli import app
from kgcheck.cli.commands import graph as graph_cmd

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Fail any attempt to open a connection: drawing must stay offline."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.mark.parametrize(("fmt", "suffix"), [("png", ".png"), ("svg", ".svg"),
                                             ("mermaid", ".mmd")])
def test_draw_writes_each_format(tmp_path: Path, fmt: str, suffix: str) -> None:
    out = tmp_path / f"dka{suffix}"
    result = runner.invoke(app, ["graph", "draw", "dka", "--format", fmt, "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    if fmt == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 2000
    elif fmt == "svg":
        text = data.decode()
        assert "<svg" in text
        for node in ("build_prompt", "ask_model", "decide"):
            assert f">{node}</text>" in text
    else:
        text = data.decode()
        assert text.lstrip("-\n").startswith("config:") or "graph TD;" in text
        assert "build_prompt --> " not in text  # conditional edges are dotted
        # Conditional edges are dotted and labelled with the router's outcome.
        assert "build_prompt -. &nbsp;continue&nbsp; .-> ask_model;" in text
        assert "build_prompt -. &nbsp;decided&nbsp; .-> __end__;" in text
        assert "decide --> __end__;" in text


def test_format_follows_the_out_suffix_and_mermaid_prints(tmp_path: Path) -> None:
    out = tmp_path / "giv-z.svg"
    result = runner.invoke(app, ["graph", "draw", "giv-z", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().lstrip().startswith(("<?xml", "<svg", "<!DOCTYPE"))
    printed = runner.invoke(app, ["graph", "draw", "dka-sc", "--format", "mermaid"])
    assert printed.exit_code == 0
    assert "sample(sample)" in printed.output and "vote(vote)" in printed.output


def test_bad_requests_name_what_is_wrong(tmp_path: Path) -> None:
    unknown = runner.invoke(app, ["graph", "draw", "nope", "--format", "mermaid"])
    assert unknown.exit_code == 2
    assert "unknown graph 'nope'; known:" in unknown.output and "dka" in unknown.output
    no_format = runner.invoke(app, ["graph", "draw", "dka", "--out", str(tmp_path / "x.gif")])
    assert no_format.exit_code == 2 and "--format png|svg|mermaid" in no_format.output
    bad_format = runner.invoke(app, ["graph", "draw", "dka", "--format", "jpg"])
    assert bad_format.exit_code == 2 and "--format 'jpg'" in bad_format.output
    no_out = runner.invoke(app, ["graph", "draw", "dka", "--format", "png"])
    assert no_out.exit_code == 2 and "give --out FILE" in no_out.output


class Inner(TypedDict, total=False):
    fact: dict
    verdict: dict


def _subgraph_host():
    inner = StateGraph(Inner)
    inner.add_node("think", lambda s: {})
    inner.add_node("answer", lambda s: {"verdict": {}})
    inner.add_edge(START, "think")
    inner.add_edge("think", "answer")
    inner.add_edge("answer", END)
    outer = StateGraph(Inner)
    outer.add_node("member", inner.compile())
    outer.add_node("tally", lambda s: {})
    outer.add_edge(START, "member")
    outer.add_edge("member", "tally")
    outer.add_edge("tally", END)
    return outer.compile()


def test_xray_shows_the_nodes_inside_subgraphs() -> None:
    host = _subgraph_host()
    flat = graph_cmd.render(host, "mermaid").decode()
    deep = graph_cmd.render(host, "mermaid", xray=True).decode()
    assert "think" not in flat
    assert "subgraph member" in deep and "member\\3athink(think)" in deep
    svg = graph_cmd.render(host, "svg", xray=True).decode()
    assert ">think</text>" in svg and ">member</text>" in svg  # the cluster is labelled


def test_the_graphs_are_the_served_ones() -> None:
    names = graph_cmd.graph_sources()
    assert {"dka", "dka-sc", "giv-z", "giv-f", "rag", "consensus"} <= set(names)


def test_docs_draws_every_format(tmp_path: Path) -> None:
    result = runner.invoke(app, ["graph", "docs", "--out-dir", str(tmp_path), "--name", "dka"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dka.mmd", "dka.png", "dka.svg"]


def test_every_conditional_edge_of_every_graph_is_labelled() -> None:
    from kgcheck.cli.commands.graph import graph_sources

    for name, (_, compile_graph) in graph_sources().items():
        result = runner.invoke(app, ["graph", "draw", name, "--format", "mermaid"])
        assert result.exit_code == 0, result.output
        dotted = [line.strip() for line in result.output.splitlines() if " -." in line]
        # Dotted lines wherever the graph has conditional edges (review has none).
        conditional = [e for e in compile_graph().get_graph().edges if e.conditional]
        assert bool(dotted) == bool(conditional), (name, dotted)
        unlabelled = [line for line in dotted if "-.->" in line]
        assert not unlabelled, (name, unlabelled)
