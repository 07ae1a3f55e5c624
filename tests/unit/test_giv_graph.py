"""The GIV graph with scripted models: the re-prompting loop, its cap, prompts and examples."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.errors import GraphRecursionError

from kgcheck.data.facts import Fact
from kgcheck.graphs.registry import get_strategy
from kgcheck.graphs.strategies import giv
from kgcheck.graphs.strategies.giv import (
    GIV_F,
    GIVContext,
    GIVFContext,
    GIVSettingError,
    builder,
    order_examples,
)
from kgcheck.prompts import PromptError

FACT = Fact(id="x1", dataset="YAGO", subject="Jaya_Bachchan", predicate="isMarriedTo",
            object="Amitabh_Bachchan")
PROSE = "I believe this is correct, they married in 1973."


def first_turn(messages: list[BaseMessage]) -> str:
    """The text of a call's first turn: its system message (if any) and the user's."""
    first = [m for m in messages[:2] if isinstance(m, SystemMessage | HumanMessage)]
    return "\n\n".join(str(m.content) for m in first)


class Calls(BaseCallbackHandler):
    """Record what each chat-model call was sent, and the metadata it carried."""

    def __init__(self) -> None:
        self.sent: list[list[BaseMessage]] = []
        self.metadata: list[dict[str, Any]] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]],
                            **kwargs: Any) -> None:
        self.sent.append(list(messages[0]))
        self.metadata.append(dict(kwargs.get("metadata") or {}))


async def _run(context: GIVContext, fact: Fact = FACT, *,
               recursion_limit: int = 40) -> tuple[dict, Calls]:
    calls = Calls()
    out = await builder.compile().ainvoke(
        {"fact": fact.as_input()}, context=context,
        config={"recursion_limit": recursion_limit, "callbacks": [calls]},
        output_keys=["verdict", "messages", "calls"],
    )
    return out, calls


async def test_compliant_at_once_takes_one_call(scripted) -> None:
    out, calls = await _run(GIVContext(model=scripted("once", ["T"])))
    verdict = out["verdict"]
    assert (verdict["label"], verdict["attempts"], verdict["raws"]) == ("T", 1, ["T"])
    assert verdict["method"] == "GIV-Z"
    assert verdict["details"]["compliant"] is True
    assert verdict["error"] is None
    assert len(calls.sent) == 1
    assert calls.metadata[0]["kgcheck_method"] == "GIV-Z"
    assert calls.metadata[0]["kgcheck_fact_id"] == "x1"
    prompt = first_turn(calls.sent[0])
    assert 'Fact: "Jaya Bachchan" | "is married to" | "Amitabh Bachchan"' in prompt
    assert "expert annotator" in prompt and "3 attempts" in prompt


async def test_non_compliant_then_compliant_reprompts_in_the_same_conversation(scripted) -> None:
    out, calls = await _run(GIVContext(model=scripted("twice", [PROSE, "F \n"])))
    verdict = out["verdict"]
    assert (verdict["label"], verdict["attempts"]) == ("F", 2)
    assert verdict["raws"] == [PROSE, "F \n"]
    assert verdict["raw"] == "F \n"
    assert verdict["details"]["compliant"] is True
    assert verdict["details"]["problems"] == ["attempt 1: no T/F verdict"]
    assert len(calls.sent) == 2
    first, second = calls.sent
    # The second call carries the whole conversation: prompt, first answer, follow-up.
    # Guidelines as the system message, the fact as the user's, then the turns.
    assert [type(m) for m in second] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert [m.content for m in second[:2]] == [m.content for m in first]
    assert second[2].content == PROSE
    assert "2 attempts remain" in second[3].content
    assert "broke the guidelines" in second[3].content
    assert [m["kgcheck_attempt"] for m in calls.metadata] == [1, 2]


async def test_never_compliant_gives_na_after_three_calls(scripted) -> None:
    answers = [PROSE, "T or F", "Judgment: NA"]
    out, calls = await _run(GIVContext(model=scripted("never", answers)))
    verdict = out["verdict"]
    assert (verdict["label"], verdict["attempts"], verdict["raws"]) == ("NA", 3, answers)
    assert verdict["error"] is None
    assert verdict["details"]["compliant"] is False
    assert verdict["details"]["problems"] == [
        "attempt 1: no T/F verdict", "attempt 2: no T/F verdict", "attempt 3: declines to decide",
    ]
    assert len(calls.sent) == 3
    assert "1 attempt remains" in calls.sent[2][-1].content
    # The guidelines, 3 user turns, 3 answers: no follow-up after the last.
    assert len(out["messages"]) == 7


@pytest.mark.parametrize("cap", [1, 2, 5, 10])
async def test_attempts_cap_in_the_context_is_honoured(scripted, cap: int) -> None:
    model = scripted(f"cap{cap}", [PROSE] * 10)
    out, calls = await _run(GIVContext(model=model, max_attempts=cap))
    assert out["verdict"]["label"] == "NA"
    assert out["verdict"]["attempts"] == cap
    assert out["verdict"]["details"]["max_attempts"] == cap
    assert len(calls.sent) == cap
    if cap > 1:
        assert f"{cap - 1} attempt" in calls.sent[1][-1].content
    assert f"You have {cap} attempts" in first_turn(calls.sent[0])


async def test_cap_set_through_the_registry_is_honoured(scripted) -> None:
    strategy = get_strategy("giv-z")
    context = strategy.make_context(model=scripted("reg", [PROSE] * 10), max_attempts=4)
    out, calls = await _run(context)
    assert out["verdict"]["attempts"] == 4 and len(calls.sent) == 4


@pytest.mark.parametrize("bad", [0, -1, 11, "3", 2.5, True])
def test_invalid_attempts_cap_is_rejected(bad: Any) -> None:
    with pytest.raises(GIVSettingError, match=r"max_attempts .*from 1 to 10"):
        GIVContext(max_attempts=bad)


def test_seed_given_as_text_is_read_as_a_number() -> None:
    assert GIVFContext(seed="7").seed == 7
    assert GIVFContext(seed="").seed is None
    with pytest.raises(GIVSettingError, match="seed 'x'"):
        GIVFContext(seed="x")


async def test_recursion_limit_is_enforced(scripted) -> None:
    with pytest.raises(GraphRecursionError):
        await _run(GIVContext(model=scripted("loop", [PROSE] * 10), max_attempts=10),
                   recursion_limit=8)


async def test_model_failure_mid_loop_keeps_earlier_answers(scripted) -> None:
    # The script runs dry on the second call, which makes the fake model raise.
    out, calls = await _run(GIVContext(model=scripted("dry", [PROSE])))
    verdict = out["verdict"]
    assert verdict["label"] == "NA"
    assert verdict["error"]
    assert verdict["raws"] == [PROSE]
    assert verdict["attempts"] == 1


async def test_unknown_model_becomes_an_error_verdict() -> None:
    out, _ = await _run(GIVContext(model="replay:gemma2:9b"))  # x1 was never recorded
    assert out["verdict"]["label"] == "NA"
    assert out["verdict"]["error"].startswith("ReplayMissing:")
    assert out["verdict"]["method"] == "GIV-Z"


async def test_defective_fact_is_not_sent(scripted) -> None:
    fact = Fact.from_triple("100", "DBpedia", ["x" * 30_000, "p", "o"])
    out, calls = await _run(GIVContext(model=scripted("none", [])), fact)
    assert out["verdict"]["label"] == "NA"
    assert "30,000 characters" in out["verdict"]["error"]
    assert calls.sent == []


async def test_dbpedia_prompt_carries_the_knowledge_cutoff(scripted) -> None:
    fact = FACT.model_copy(update={"dataset": "DBpedia"})
    _, calls = await _run(GIVContext(model=scripted("db", ["T"])), fact)
    assert "2015" in first_turn(calls.sent[0])
    _, calls = await _run(GIVContext(model=scripted("yg", ["T"])))
    assert "2015" not in first_turn(calls.sent[0])


@pytest.mark.parametrize(("dataset", "predicate"), [
    ("YAGO", "was born in"), ("yago", "was born in"), ("FactBench", "birth place"),
    ("DBPEDIA", "birth place"), ("MyKG", "was born in"),
])
async def test_few_shot_examples_follow_the_facts_kg(scripted, dataset: str,
                                                     predicate: str) -> None:
    fact = FACT.model_copy(update={"dataset": dataset})
    out, calls = await _run(GIVFContext(model=scripted("fs", ["T"])), fact)
    prompt = first_turn(calls.sent[0])
    assert f'Fact: "Monica Bellucci" | "{predicate}" | "Città di Castello, Italy"\nReply: T' in prompt
    assert prompt.count("Reply: T") == 3 and prompt.count("Reply: F") == 3
    assert out["verdict"]["method"] == "GIV-F"
    assert calls.metadata[0]["kgcheck_method"] == "GIV-F"
    expected = "default.json" if dataset == "MyKG" else f"{dataset.lower()}.json"
    assert out["verdict"]["details"]["examples"] == expected
    # The fact comes after the examples.
    assert prompt.rstrip().endswith('Fact: "Jaya Bachchan" | "is married to" | "Amitabh Bachchan"')


async def test_fact_kg_vocabulary_differs_between_files(scripted) -> None:
    prompts = {}
    for kg in ("YAGO", "DBpedia"):
        fact = FACT.model_copy(update={"dataset": kg})
        _, calls = await _run(GIVFContext(model=scripted(kg, ["T"])), fact)
        prompts[kg] = first_turn(calls.sent[0])
    assert '"Hyundai Motor Company" | "location created" | "Rio de Janeiro"' in prompts["YAGO"]
    assert '"Hyundai Motor Company" | "foundation place" | "Rio de Janeiro"' in prompts["DBpedia"]
    assert '"La Rambla" | "location city" | "Berlin"' in prompts["DBpedia"]


async def test_a_new_kg_is_added_by_adding_a_file(scripted, tmp_path, monkeypatch) -> None:
    for path in giv.EXAMPLES_DIR.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "wikidata.json").write_text(json.dumps({"examples": [
        {"subject": "Q1", "predicate": "P31", "object": "Q2", "answer": "T"},
        {"subject": "Q3", "predicate": "P31", "object": "Q4", "answer": "F"},
    ]}), encoding="utf-8")
    monkeypatch.setattr(giv, "EXAMPLES_DIR", tmp_path)
    fact = FACT.model_copy(update={"dataset": "Wikidata"})
    out, calls = await _run(GIVFContext(model=scripted("wd", ["F"])), fact)
    prompt = first_turn(calls.sent[0])
    assert 'Fact: "Q1" | "P31" | "Q2"\nReply: T\n\nFact: "Q3" | "P31" | "Q4"\nReply: F' in prompt
    assert out["verdict"]["details"]["examples"] == "wikidata.json"


async def test_examples_file_from_the_context(scripted, tmp_path) -> None:
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps([{"subject": "Rome", "predicate": "capitalOf",
                                 "object": "Italy", "answer": "t"}]), encoding="utf-8")
    _, calls = await _run(GIVFContext(model=scripted("m", ["T"]),
                                     examples=str(mine)))
    assert 'Fact: "Rome" | "capital of" | "Italy"\nReply: T' in first_turn(calls.sent[0])
    assert "Monica Bellucci" not in first_turn(calls.sent[0])


@pytest.mark.parametrize(("content", "message"), [
    ("[{", "malformed JSON"),
    ("[]", "non-empty list"),
    ('[{"subject": "a", "predicate": "b", "object": "c", "answer": "maybe"}]',
     r"example 1 has answer 'maybe'; expected T or F"),
    ('{"examples": [{"subject": "a", "object": "c", "answer": "T"}]}', "example 1 lacks predicate"),
])
async def test_bad_examples_file_is_rejected(scripted, tmp_path, content: str,
                                             message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(PromptError, match=message):
        await _run(GIVFContext(model=scripted("b", ["T"]), examples=str(bad)))


async def test_missing_examples_file_lists_the_known_ones(scripted) -> None:
    with pytest.raises(PromptError, match=r"examples file 'nope.json' not found.*yago.json"):
        await _run(GIVFContext(model=scripted("n", ["T"]), examples="nope.json"))


def test_example_order_is_fixed_or_seeded() -> None:
    examples = giv.load_examples(giv.EXAMPLES_DIR / "yago.json")
    assert order_examples(examples, None, "1") == examples
    shuffled = order_examples(examples, 7, "1")
    assert sorted(shuffled, key=repr) == sorted(examples, key=repr)
    assert order_examples(examples, 7, "1") == shuffled  # reproducible
    orders = {tuple(e.subject for e in order_examples(examples, 7, str(i))) for i in range(20)}
    assert len(orders) > 1  # a different order per fact


async def test_seeded_prompts_are_reproducible(scripted) -> None:
    sent = []
    for n in range(2):
        _, calls = await _run(GIVFContext(model=scripted(f"s{n}", ["T"]), seed=3))
        sent.append(first_turn(calls.sent[0]))
    assert sent[0] == sent[1]


async def test_prompt_missing_a_placeholder_is_rejected(scripted, tmp_path) -> None:
    no_examples = tmp_path / "few.txt"
    no_examples.write_text("Is {subject} {predicate} {object}? T or F.")
    with pytest.raises(PromptError, match=r"missing placeholder\(s\) \{examples\}"):
        await _run(GIVFContext(model=scripted("p1", ["T"]),
                              prompt=str(no_examples)))
    # The same file is fine for the zero-shot variant, which needs no examples.
    out, _ = await _run(GIVContext(model=scripted("p2", ["T"]), prompt=str(no_examples)))
    assert out["verdict"]["label"] == "T"
    retry = tmp_path / "retry.txt"
    retry.write_text("Wrong, try again.")
    with pytest.raises(PromptError, match=r"missing placeholder\(s\) \{attempts_left\}"):
        await _run(GIVContext(model=scripted("p3", [PROSE, "T"]), retry_prompt=str(retry)))


async def test_own_prompt_files_are_used(scripted, tmp_path) -> None:
    prompt = tmp_path / "p.txt"
    prompt.write_text("KG={dataset} {subject}/{predicate}/{object} tries={max_attempts}")
    retry = tmp_path / "r.txt"
    retry.write_text("Again: {attempts_left} ({remaining} left).")
    _, calls = await _run(GIVContext(model=scripted("own", [PROSE, "T"]), prompt=str(prompt),
                                     retry_prompt=str(retry)))
    assert first_turn(calls.sent[0]) == 'KG=YAGO "Jaya Bachchan"/"is married to"/"Amitabh Bachchan" tries=3'
    assert calls.sent[1][-1].content == "Again: 2 attempts remain (2 left)."


def test_registered_variants() -> None:
    zero, few = get_strategy("giv-z"), get_strategy("giv-f")
    assert (zero.label, few.label) == ("GIV-Z", "GIV-F")
    assert (zero.replays, few.replays) == ("GIV-Z", "GIV-F")
    zctx, fctx = zero.make_context(), few.make_context()
    assert (zctx.FEW_SHOT, zctx.prompt, zctx.METHOD) == (False, "giv-z.txt", "GIV-Z")
    assert (fctx.FEW_SHOT, fctx.prompt, fctx.METHOD) == (True, "giv-f.txt", "GIV-F")
    assert zctx.max_attempts == 3


def test_graph_shape() -> None:
    assert giv.graph.name == "giv-z"
    nodes = set(giv.graph.get_graph().nodes)
    assert {"build_prompt", "ask_model", "check", "reprompt", "decide", "give_up"} <= nodes
    edges = {(e.source, e.target) for e in giv.graph.get_graph().edges}
    assert ("reprompt", "ask_model") in edges
    assert {("check", "decide"), ("check", "reprompt"), ("check", "give_up")} <= edges


async def test_context_given_as_a_dict_like_the_server_does(scripted) -> None:
    out = await GIV_F.compile().ainvoke(
        {"fact": FACT.as_input()},
        context={"model": scripted("d", [PROSE, PROSE]), "max_attempts": 2},
        config={"recursion_limit": 40},
    )
    assert out["verdict"]["attempts"] == 2
    assert out["verdict"]["method"] == "GIV-F"


async def test_nodes_do_no_blocking_io(scripted, tmp_path) -> None:
    """The dev server runs blockbuster: every file read must happen off the event loop."""
    blockbuster = pytest.importorskip("blockbuster")
    examples = tmp_path / "ex.json"  # a fresh file: nothing cached from earlier tests
    examples.write_text(json.dumps([{"subject": "a", "predicate": "b", "object": "c",
                                     "answer": "T"}]), encoding="utf-8")
    context = GIVFContext(model=scripted("bb", [PROSE, "T"]), seed=1,
                         examples=str(examples))
    graph = builder.compile()
    with blockbuster.blockbuster_ctx():
        out = await graph.ainvoke({"fact": FACT.as_input()}, context=context,
                                  config={"recursion_limit": 40})
    assert (out["verdict"]["label"], out["verdict"]["attempts"]) == ("T", 2)
