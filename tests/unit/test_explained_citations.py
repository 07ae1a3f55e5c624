"""Cited evidence: passage ids as the prompt gave them, kept only when really shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgcheck.data.datasets import load_facts
from kgcheck.graphs import explain
from kgcheck.graphs.registry import get_strategy

FIXTURE = Path(__file__).resolve().parents[2] / "vendored" / "sample-corpus"
SENTENCE = "Arlene Alda is married to Alan Alda."
QUESTIONS = "1. Who is Arlene Alda married to?\n2. When did Arlene Alda marry Alan Alda?"


@pytest.fixture(scope="module")
def yago():
    return {f.id: f for f in load_facts("yago")}


async def _run(fact, model: str, **values) -> dict:
    strategy = get_strategy("rag")
    ctx = strategy.make_context(model=model, corpus=str(FIXTURE), index="memory", **values)
    out = await strategy.compile().ainvoke({"fact": fact.as_input()}, context=ctx,
                                           output_keys=["verdict", "messages"])
    return out


async def test_cited_passages_keep_their_source_and_invented_ids_are_counted(scripted, yago):
    answer = '{"output": "yes"}\nReason: P1 says so.\nCited: P1, P9, yago/10143/2'
    out = await _run(yago["10143"], scripted("cite", [SENTENCE, QUESTIONS, answer]),
                     citations=True, reasons=True)
    verdict = out["verdict"]
    user = out["messages"][1].content
    assert 'passage="P1"' in user and "Cited:" in out["messages"][0].content
    assert verdict["label"] == "T" and verdict["rationale"] == "P1 says so."
    shown = verdict["details"]["evidence"]
    first = shown[0]
    # P1 and the document id of P1 name one passage: it is kept once.
    assert verdict["citations"] == [{"passage": "P1", "doc_id": first["doc_id"],
                                     "chunk_id": first["chunk_id"], "url": first["url"],
                                     "text": first["text"][:explain.MAX_REASON_CHARS]}]
    assert verdict["answer_problems"] == [explain.NOT_SHOWN.format(id="P9")]


@pytest.mark.parametrize("answer", ['{"output": "no"}\nCited: none', '{"output": "no"}',
                                    '{"output": "no"}\nCited: P7'])
async def test_an_answer_that_cites_nothing_is_flagged(scripted, yago, answer):
    out = await _run(yago["10143"], scripted(f"none{len(answer)}", [SENTENCE, QUESTIONS, answer]),
                     citations=True)
    verdict = out["verdict"]
    assert verdict["label"] == "F" and verdict["citations"] == []
    assert explain.CITES_NOTHING in verdict["answer_problems"]


async def test_without_the_setting_the_prompt_has_no_passage_ids(scripted, yago):
    out = await _run(yago["10143"], scripted("plain-rag", [SENTENCE, QUESTIONS,
                                                           '{"output": "yes"}']))
    assert 'passage="' not in out["messages"][1].content
    assert out["verdict"]["citations"] is None
    # Every step's conversation is kept, the verification with the evidence last.
    steps = [t.get("step") for t in out["verdict"]["conversation"]]
    assert steps[0] == "sentence" and steps[-1] == "verify" and "questions" in steps


async def test_no_evidence_with_abstain_is_nei_not_a_deletion(scripted, yago):
    out = await _run(yago["5"], scripted("nei-none", ["A sentence.", "Q one about it?"]),
                     abstain=True)
    verdict = out["verdict"]
    assert verdict["label"] == "NEI" and "no evidence" in verdict["details"]["reason"]


async def test_nei_variant_tells_refuted_from_not_said(scripted, yago):
    answer = '{"output": "not enough evidence"}'
    out = await _run(yago["10143"], scripted("nei-rag", [SENTENCE, QUESTIONS, answer]),
                     abstain=True)
    assert out["verdict"]["label"] == "NEI"
    assert "not enough evidence" in out["messages"][0].content


def test_problems_are_counted_by_kind():
    from kgcheck.evals.metrics import problem_counts

    records = [{"answer_problems": [explain.NOT_SHOWN.format(id="P9"), explain.CITES_NOTHING]},
               {"answer_problems": [f"sample 2: {explain.NOT_SHOWN.format(id='P4')}"]},
               {"answer_problems": [f"replay:gemma2:9b: {explain.CITES_NOTHING}"]}, {}]
    assert problem_counts(records) == {
        explain.CITES_NOTHING: 2, explain.NOT_SHOWN.format(id="...").replace('"', "'"): 2}
