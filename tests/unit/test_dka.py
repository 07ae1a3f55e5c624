"""The DKA graph: prompt, model, strict verdict (the published F1: tests/e2e/test_paper_figures.py)."""

from __future__ import annotations

import pytest

from kgcheck.data.facts import Fact
from kgcheck.graphs.strategies.dka import DKAContext, builder

FACT = Fact(id="x1", dataset="YAGO", subject="Jaya_Bachchan", predicate="isMarriedTo",
            object="Amitabh_Bachchan")


async def _verdict(context: DKAContext, fact: Fact = FACT) -> dict:
    graph = builder.compile()
    out = await graph.ainvoke({"fact": fact.as_input()}, context=context,
                              config={"recursion_limit": 20})
    return out["verdict"]


@pytest.mark.parametrize(("answer", "label"), [("T", "T"), ("F \n", "F"), ("**True**", "T"),
                                               ("Maybe, it depends.", "NA")])
async def test_verdict_from_scripted_answers(scripted, answer: str, label: str) -> None:
    verdict = await _verdict(DKAContext(model=scripted("dka", [answer])))
    assert verdict["label"] == label
    assert verdict["raw"] == answer
    assert verdict["attempts"] == 1
    assert verdict["error"] is None


async def test_prompt_carries_the_readable_fact_and_kg_note(tmp_path, scripted) -> None:
    prompt = tmp_path / "mine.txt"
    prompt.write_text("KG={dataset} S={subject} P={predicate} O={object} NOTE={kg_note}")
    graph = builder.compile()
    fact = FACT.model_copy(update={"dataset": "DBpedia"})
    out = await graph.ainvoke({"fact": fact.as_input()},
                              context=DKAContext(model=scripted("p", ["T"]), prompt=str(prompt)),
                              output_keys=["messages"])
    sent = out["messages"][0].content
    assert sent.startswith('KG=DBpedia S="Jaya Bachchan" P="is married to" O="Amitabh Bachchan" NOTE=')
    assert "2015" in sent


async def test_prompt_missing_a_placeholder_is_rejected(tmp_path, scripted) -> None:
    from kgcheck.prompts import PromptError

    prompt = tmp_path / "bad.txt"
    prompt.write_text("Is {subject} related to {object}?")
    with pytest.raises(PromptError, match=r"missing placeholder\(s\) \{predicate\}"):
        await _verdict(DKAContext(model=scripted("b", ["T"]), prompt=str(prompt)))


async def test_defective_fact_is_not_sent(scripted) -> None:
    fact = Fact.from_triple("100", "DBpedia", ["x" * 30_000, "p", "o"])
    verdict = await _verdict(DKAContext(model=scripted("never", [])), fact)
    assert verdict["label"] == "NA"
    assert "30,000 characters" in verdict["error"]


async def test_model_failure_becomes_an_na_verdict_with_the_error() -> None:
    verdict = await _verdict(DKAContext(model="replay:gemma2:9b"))  # x1 was never recorded
    assert verdict["label"] == "NA"
    assert verdict["error"].startswith("ReplayMissing: replay:gemma2:9b has no recorded")
