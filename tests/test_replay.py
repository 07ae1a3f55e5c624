"""Replay answers with the study's recorded answers, keyed by the call's metadata."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage

from graphs.calls import ask, call_config
from graphs.models import ModelOptions, resolve_model
from graphs.replay import ReplayMissing, lookup, recorded_models
from graphs.state import Fact
from graphs.upstream import recorded_path

YAGO_5 = Fact(id="5", dataset="YAGO", subject="Alexander_III_of_Russia", predicate="isMarriedTo",
              object="Maria_Feodorovna__Dagmar_of_Denmark_", label=True)


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
    reply = await ask(model, [HumanMessage("any prompt at all")], YAGO_5, "DKA")
    recorded = lookup(str(__import__("graphs.upstream").upstream.VENDORED_DIR), "gemma2:9b",
                      "YAGO", "DKA", "5")
    assert reply.text == recorded["text"] == "T"
    # The study's measured latency is reported, not the lookup time.
    assert reply.seconds == pytest.approx(0.7309699058532715)


async def test_prompt_text_does_not_matter_but_the_fact_does(tmp_path) -> None:
    data = _recorded(tmp_path, "DKA", "toy:1b", [
        {"id": "1", "response": "F", "response_time": 0.5},
        {"id": "2", "response": "T", "response_time": 0.25},
    ])
    model = resolve_model("replay:toy:1b", ModelOptions(data_dir=data))
    one = Fact(id="1", dataset="Toy", subject="a", predicate="b", object="c")
    two = one.model_copy(update={"id": "2"})
    assert (await ask(model, [HumanMessage("x")], one, "DKA")).text == "F"
    assert (await ask(model, [HumanMessage("x")], two, "DKA")).text == "T"


async def test_rag_replay_returns_the_raw_full_answer() -> None:
    model = resolve_model("replay:gemma2:9b")
    fact = Fact(id="22", dataset="YAGO", subject="Amitabh_Bachchan", predicate="isMarriedTo",
                object="Jaya_Bachchan")
    reply = await ask(model, [HumanMessage("context...")], fact, "RAG")
    assert "output" in reply.text and "yes" in reply.text
    sentence = await ask(model, [HumanMessage("turn into a sentence")], fact, "RAG", step="sentence")
    assert sentence.text == "Amitabh Bachchan is married to Jaya Bachchan."


async def test_judges_answers_are_replayed_raw() -> None:
    model = resolve_model("replay:mistral-nemo:12b")
    fact = Fact(id="correct_award_00000", dataset="FactBench", subject="s", predicate="p", object="o")
    assert (await ask(model, [HumanMessage("x")], fact, "DKA")).text == "F"


async def test_missing_fact_is_a_clear_error(tmp_path) -> None:
    model = resolve_model("replay:gemma2:9b")
    ghost = YAGO_5.model_copy(update={"id": "no-such-fact"})
    with pytest.raises(ReplayMissing, match="no recorded DKA answer for YAGO fact 'no-such-fact'"):
        await ask(model, [HumanMessage("x")], ghost, "DKA")
    with pytest.raises(ReplayMissing, match="needs the fact being checked"):
        await model.ainvoke([HumanMessage("x")])


async def test_replay_can_sleep_the_recorded_latency(tmp_path) -> None:
    data = _recorded(tmp_path, "DKA", "toy:1b", [{"id": "1", "response": "T", "response_time": 0.3}])
    model = resolve_model("replay:toy:1b", ModelOptions(data_dir=data, replay_latency=0.5))
    fact = Fact(id="1", dataset="Toy", subject="a", predicate="b", object="c")
    import time

    started = time.perf_counter()
    await model.ainvoke([HumanMessage("x")], config=call_config(fact, "DKA"))
    assert time.perf_counter() - started >= 0.15


def test_recorded_models_lists_members_and_judges() -> None:
    models = recorded_models()
    assert {"gemma2:9b", "qwen2.5:7b", "llama3.1:8b", "mistral:7b"} <= set(models)
    assert {"gemma2:27b", "mistral-nemo:12b"} <= set(models)
