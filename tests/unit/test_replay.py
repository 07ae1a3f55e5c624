"""Replay answers with the study's recorded answers, keyed by the call's metadata."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage

from kgcheck.data.facts import Fact
from kgcheck.data.recordings import ReplayMissing, lookup, recorded_models
from kgcheck.data.upstream import VENDORED_DIR, recorded_path
from kgcheck.graphs.calls import call_config, reply_text
from kgcheck.graphs.context import Context
from kgcheck.graphs.strategies.dka import DKAContext
from kgcheck.graphs.strategies.rag import RAGContext
from kgcheck.providers import ModelSettings, resolve_model

YAGO_5 = Fact(id="5", dataset="YAGO", subject="Alexander_III_of_Russia", predicate="isMarriedTo",
              object="Maria_Feodorovna__Dagmar_of_Denmark_", label=True)


async def ask(model, messages, fact: Fact, asked_by: type[Context] = DKAContext,
              step: str = "verdict") -> str:
    """The replayed answer to ``messages`` about ``fact``, asked as ``asked_by``'s strategy."""
    reply = await model.ainvoke(messages, config=call_config(fact, asked_by, step))
    return reply_text(reply)


def _recorded(tmp_path, method: str, model: str, rows: list[dict]) -> str:
    root = tmp_path / "up"
    (root / "dataset" / "Toy" / "data").mkdir(parents=True, exist_ok=True)
    (root / "dataset" / "Toy" / "data" / "kg.json").write_text(json.dumps({"1": ["a", "b", "c"]}))
    path = root / recorded_path(method, "Toy", model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows))
    return str(root)


async def test_replay_returns_the_recorded_answer_of_the_fact_asked() -> None:
    model = resolve_model("replay:gemma2:9b")
    reply = await model.ainvoke([HumanMessage("any prompt at all")],
                                config=call_config(YAGO_5, DKAContext))
    recorded = lookup(str(VENDORED_DIR), "gemma2:9b", "YAGO", "DKA", "5")
    assert reply.content == recorded["text"] == "T"
    # The study's measured latency is reported, not the lookup time.
    assert reply.response_metadata["recorded_seconds"] == pytest.approx(0.7309699058532715)


async def test_prompt_text_does_not_matter_but_the_fact_does(tmp_path) -> None:
    data = _recorded(tmp_path, "DKA", "toy:1b", [
        {"id": "1", "response": "F", "response_time": 0.5},
        {"id": "2", "response": "T", "response_time": 0.25},
    ])
    model = resolve_model("replay:toy:1b", ModelSettings(data_dir=data))
    one = Fact(id="1", dataset="Toy", subject="a", predicate="b", object="c")
    two = one.model_copy(update={"id": "2"})
    assert await ask(model, [HumanMessage("x")], one) == "F"
    assert await ask(model, [HumanMessage("x")], two) == "T"


async def test_rag_replay_returns_the_raw_full_answer() -> None:
    model = resolve_model("replay:gemma2:9b")
    fact = Fact(id="22", dataset="YAGO", subject="Amitabh_Bachchan", predicate="isMarriedTo",
                object="Jaya_Bachchan")
    reply = await ask(model, [HumanMessage("context...")], fact, RAGContext)
    assert "output" in reply and "yes" in reply
    sentence = await ask(model, [HumanMessage("turn into a sentence")], fact, RAGContext,
                         step="sentence")
    assert sentence == "Amitabh Bachchan is married to Jaya Bachchan."


async def test_judges_answers_are_replayed_raw() -> None:
    model = resolve_model("replay:mistral-nemo:12b")
    fact = Fact(id="correct_award_00000", dataset="FactBench", subject="s", predicate="p", object="o")
    assert await ask(model, [HumanMessage("x")], fact) == "F"


async def test_missing_fact_is_a_clear_error(tmp_path) -> None:
    model = resolve_model("replay:gemma2:9b")
    ghost = YAGO_5.model_copy(update={"id": "no-such-fact"})
    with pytest.raises(ReplayMissing, match="no recorded DKA answer for YAGO fact 'no-such-fact'"):
        await ask(model, [HumanMessage("x")], ghost)
    with pytest.raises(ReplayMissing, match="answers only the FactCheck study's own facts"):
        await model.ainvoke([HumanMessage("x")])


async def test_a_strategy_the_study_did_not_run_gets_no_replay() -> None:
    class Unrecorded(DKAContext):
        METHOD = "DKA-COT"
        REPLAYS = None

    model = resolve_model("replay:gemma2:9b")
    with pytest.raises(ReplayMissing, match="no recorded answers for the DKA-COT strategy"):
        await ask(model, [HumanMessage("x")], YAGO_5, Unrecorded)


async def test_replay_can_sleep_the_recorded_latency(tmp_path) -> None:
    data = _recorded(tmp_path, "DKA", "toy:1b", [{"id": "1", "response": "T", "response_time": 0.3}])
    model = resolve_model("replay:toy:1b", ModelSettings(data_dir=data, replay_latency=0.5))
    fact = Fact(id="1", dataset="Toy", subject="a", predicate="b", object="c")
    import time

    started = time.perf_counter()
    await model.ainvoke([HumanMessage("x")], config=call_config(fact, DKAContext))
    assert time.perf_counter() - started >= 0.15


def test_recorded_models_lists_members_and_judges() -> None:
    models = recorded_models()
    assert {"gemma2:9b", "qwen2.5:7b", "llama3.1:8b", "mistral:7b"} <= set(models)
    assert {"gemma2:27b", "mistral-nemo:12b"} <= set(models)


@pytest.mark.parametrize(("fact", "says"), [
    ({"subject": "Ada", "predicate": "knows", "object": "Bob"}, "lacks the fact's dataset"),
    ({"subject": "Ada", "predicate": "knows", "object": "Bob", "dataset": "YAGO", "id": "x9"},
     "replay only knows the facts of the FactCheck study"),
])
async def test_a_studio_fact_replay_does_not_know_says_so_in_user_terms(fact, says) -> None:
    from kgcheck.graphs.strategies.dka import graph

    out = await graph.ainvoke({"fact": fact})
    error = out["verdict"]["error"]
    assert says in error and "ollama:" in error
    assert "kgcheck_" not in error
