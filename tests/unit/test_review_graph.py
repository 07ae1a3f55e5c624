"""The review graph: it pauses with what a person needs, re-asks on a malformed answer, and
a review paused in one process is resumed in another through the SQLite checkpointer."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.graphs.consensus.graph import ConsensusContext
from kgcheck.graphs.consensus.graph import builder as consensus_builder
from kgcheck.graphs.registry import NotAStrategyError, get_graph, get_strategy, graphs, strategies
from kgcheck.graphs.review import read_answer
from tests.support.review_runs import IMG, SCRIPT, _verdict

FACT = {"id": "3", "dataset": "mine", "subject": f"Evil{SCRIPT}", "predicate": "hasName",
        "object": IMG}
TIE = {"id": "5", "dataset": "mine", "subject": "Marie_Curie", "predicate": "hasWonPrize",
       "object": "Nobel_Prize_in_Physics"}


def _config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


async def test_pauses_with_what_a_person_needs_and_resumes_after_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "review.sqlite")
    verdict = _verdict("3", "r")
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        graph = get_graph("review").compile(checkpointer=saver)
        out = await graph.ainvoke({"fact": FACT, "verdict": verdict}, _config("a"))
    question = out["__interrupt__"][0].value
    assert question["fact"]["subject"] == f"Evil{SCRIPT}"
    assert question["fact"]["readable"]["predicate"] == "has name"
    assert question["model"] == {"label": "NA", "method": "DKA", "model": "ollama:gemma2:9b",
                                 "raw": f"NA because {IMG}", "error": None}
    assert question["evidence"] == [{"source": "https://example.org/evil", "doc_id": "d1",
                                     "similarity": 0.91,
                                     "text": f"Evidence {IMG} and {SCRIPT} here.",
                                     "passages": 1}]
    assert question["problem"] is None and question["tie"] is False

    # Another process, another connection: the pause is still there, and resumes.
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        graph = get_graph("review").compile(checkpointer=saver)
        state = await graph.aget_state(_config("a"))
        assert state.next == ("ask_person",)
        assert state.interrupts[0].value == question
        out = await graph.ainvoke(Command(resume={"label": "F", "note": "made up"}),
                                  _config("a"), context={"reviewer": "ana"})
    review = out["verdict"].pop("review")
    assert out["verdict"] == verdict  # the verdict as the run wrote it, plus the review
    assert review["label"] == "F" and review["note"] == "made up"
    assert review["reviewer"] == "ana"
    assert review["reviewed_at"].endswith("+00:00")


async def test_a_malformed_answer_asks_again_saying_what_was_wrong(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "r.sqlite")) as saver:
        graph = get_graph("review").compile(checkpointer=saver)
        await graph.ainvoke({"fact": TIE, "verdict": _verdict("5", "r")}, _config("t"))
        for bad, problem in [({"label": "maybe"}, "label 'maybe' is not one of T, F, skip"),
                             (42, "expected {\"label\""),
                             ({"label": "T", "note": 3}, "note must be text")]:
            out = await graph.ainvoke(Command(resume=bad), _config("t"))
            asked = out["__interrupt__"][0].value
            assert problem in asked["problem"]
            assert asked["tie"] is True
            assert [v["label"] for v in asked["votes"]] == ["T", "F"]
        out = await graph.ainvoke(Command(resume="skip"), _config("t"))
    assert "__interrupt__" not in out
    assert out["verdict"]["review"]["label"] == "skip"
    assert out["verdict"]["review"]["reviewer"] is None


def test_answers_are_read_strictly() -> None:
    assert read_answer({"label": "t", "note": " ok "})["label"] == "T"
    assert read_answer({"label": "T", "note": " ok "})["note"] == "ok"
    with pytest.raises(ValueError, match="reviewed_at 'yesterday' is not an ISO 8601 time"):
        read_answer({"label": "F", "reviewed_at": "yesterday"})


async def test_a_verdict_that_is_not_one_is_refused() -> None:
    graph = get_graph("review").compile()
    with pytest.raises(ValueError, match=r'takes \{"fact": \{...\}, "verdict": \{...\}\}'):
        await graph.ainvoke({"fact": TIE, "verdict": {"label": "maybe"}})


def test_review_is_served_but_is_not_a_strategy() -> None:
    assert "review" in graphs() and "review" not in strategies()
    assert get_graph("review").kind == "review"
    with pytest.raises(NotAStrategyError, match="review is a review graph .* `kgcheck review RUN`"):
        get_strategy("review")
    result = CliRunner().invoke(app, ["run", "--dataset", "yago", "--method", "review",
                                      "--limit", "1", "--out", "unused"])
    assert result.exit_code == 2
    assert "not a fact-checking strategy" in result.output
    assert "Traceback" not in result.output


async def test_consensus_members_cannot_run_the_review_graph() -> None:
    graph = consensus_builder.compile()
    ctx = ConsensusContext(members=["replay:gemma2:9b", "replay:qwen2.5:7b"], method="review")
    with pytest.raises(NotAStrategyError, match="not a fact-checking strategy"):
        await graph.ainvoke({"fact": TIE}, context=ctx)
