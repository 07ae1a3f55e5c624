"""Consensus graph with scripted members: votes, ties, judges, errors, concurrency."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from kgcheck.data.facts import Fact
from kgcheck.graphs.consensus.graph import (
    ConsensusContext,
    build,
    graph,
    member_specs,
    member_values,
    settings_class,
)
from kgcheck.graphs.consensus.judges import (
    DEFAULT_SIBLINGS,
    ConsensusError,
    larger_sibling,
    parse_alignment,
    pick_member,
    resolve_judge,
)
from kgcheck.graphs.strategies.dka import DKAContext
from kgcheck.graphs.votes import tally as majority
from kgcheck.providers import UnknownModelError
from tests.support.scripted import SCRIPTED, register_scripted

FACT = Fact(id="f1", dataset="Mini", subject="Paris", predicate="capitalOf", object="France",
            label=True)


class SlowModel(BaseChatModel):
    """Answer ``answer`` after ``delay`` seconds, counting calls; fail if ``fail`` is set."""

    answer: str = "T"
    delay: float = 0.0
    fail: str = ""
    calls: Any = None

    @property
    def _llm_type(self) -> str:
        return "slow-test"

    def _reply(self) -> ChatResult:
        self.calls.append(time.perf_counter())
        if self.fail:
            raise RuntimeError(self.fail)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.answer))])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        time.sleep(self.delay)
        return self._reply()

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None,
                         **kwargs: Any) -> ChatResult:
        await asyncio.sleep(self.delay)
        return self._reply()


@pytest.fixture
def model() -> Iterator[Callable[..., tuple[str, list[float]]]]:
    """Register ``scripted:<name>`` as a SlowModel; return its spec and its call times."""
    added: list[str] = []

    def make(name: str, answer: str = "T", delay: float = 0.0,
             fail: str = "") -> tuple[str, list[float]]:
        calls: list[float] = []
        register_scripted(name, lambda: SlowModel(answer=answer, delay=delay, fail=fail,
                                                  calls=calls))
        added.append(name)
        return f"scripted:{name}", calls

    yield make
    for name in added:
        SCRIPTED.pop(name, None)


def members_voting(make: Callable[..., tuple[str, list[float]]], *answers: str) -> list[str]:
    """Register one member per answer and return their specs."""
    return [make(f"m{i}", answer=a)[0] for i, a in enumerate(answers)]


async def check(members: list[str], judge: str = "none", fact: Fact = FACT,
                **values: Any) -> dict[str, Any]:
    """Run the consensus graph on one fact; return its final state."""
    ctx = ConsensusContext(members=members, judge=judge, **values)
    return await graph.ainvoke({"fact": fact.as_input()}, context=ctx,
                               output_keys=["verdict", "votes", "tally", "plan", "judge_verdict"])


def labels_of(verdict: dict[str, Any]) -> list[str]:
    """The member votes of a verdict, in member order."""
    return [v["label"] for v in verdict["details"]["votes"]]


# ---------------------------------------------------------------- majority rule


@pytest.mark.parametrize(
    ("labels", "decision"),
    [
        (["T", "T", "T", "T"], "T"),
        (["T", "T", "T", "F"], "T"),
        (["F", "F", "T", "F"], "F"),
        (["T", "F", "T", "F"], "tie"),
        (["T", "T", "F", "NA"], "T"),
        (["T", "F", "NA", "NA"], "tie"),
        (["NA", "NA", "NA"], "tie"),
        (["T", "F", "F"], "F"),
        (["T", "T", "T", "F", "F"], "T"),
        (["T", "T", "F", "F", "NA"], "tie"),
    ],
)
def test_majority_rule_for_any_number_of_voters(labels: list[str], decision: str) -> None:
    tally = majority(labels)
    assert tally["decision"] == decision
    assert sum(tally["counts"].values()) == len(labels)
    assert tally["counts"]["NA"] == labels.count("NA")


# ---------------------------------------------------------------- votes through the graph


async def test_four_to_zero_is_true_without_a_judge(model) -> None:
    members = members_voting(model, "T", "T", "T", "T")
    judge, judge_calls = model("judge", answer="F")
    out = await check(members, judge=judge)
    verdict = out["verdict"]
    assert verdict["label"] == "T"
    assert verdict["details"]["decision"] == "T"
    assert verdict["details"]["counts"] == {"T": 4, "F": 0, "NA": 0}
    assert verdict["details"]["judge_called"] is False
    assert judge_calls == []
    assert verdict["method"] == "DKA"
    assert verdict["model"] == ",".join(members)
    assert verdict["raws"] == ["T"] * 4


async def test_three_to_one_is_the_majority(model) -> None:
    members = members_voting(model, "F", "F", "T", "F")
    out = await check(members, judge=model("judge", answer="T")[0])
    verdict = out["verdict"]
    assert verdict["label"] == "F"
    assert labels_of(verdict) == ["F", "F", "T", "F"]
    assert verdict["details"]["judge_called"] is False
    assert "judge_verdict" not in out


async def test_two_two_tie_goes_to_the_judge(model) -> None:
    members = members_voting(model, "T", "F", "F", "T")
    judge, judge_calls = model("judge", answer="T")
    out = await check(members, judge=judge)
    verdict = out["verdict"]
    assert out["tally"]["decision"] == "tie"
    assert verdict["label"] == "T"
    assert len(judge_calls) == 1
    details = verdict["details"]
    assert details["judge_called"] and details["judge_decided"]
    assert details["judge"] == judge
    assert details["judge_raw"] == "T" and verdict["raw"] == "T"
    assert details["majority"] is None
    assert out["judge_verdict"]["model"] == judge


async def test_two_two_tie_with_an_invalid_judge_answer_stays_na(model) -> None:
    members = members_voting(model, "T", "F", "T", "F")
    out = await check(members, judge=model("judge", answer="It depends.")[0])
    verdict = out["verdict"]
    assert verdict["label"] == "NA"
    assert verdict["details"]["judge_called"] is True
    assert verdict["details"]["judge_decided"] is False
    assert verdict["details"]["judge_label"] == "NA"
    assert verdict["details"]["judge_raw"] == "It depends."


async def test_tie_without_a_judge_is_na(model) -> None:
    out = await check(members_voting(model, "T", "F", "T", "F"), judge="none")
    assert out["verdict"]["label"] == "NA"
    assert out["verdict"]["details"]["decision"] == "tie"
    assert out["verdict"]["details"]["judge_called"] is False


async def test_a_failing_member_votes_na_and_the_others_decide(model) -> None:
    members = members_voting(model, "T", "T", "F")
    broken, _ = model("broken", fail="model server exploded")
    out = await check([*members, broken], judge=model("judge", answer="F")[0])
    verdict = out["verdict"]
    assert labels_of(verdict) == ["T", "T", "F", "NA"]
    assert verdict["label"] == "T"  # 2 T vs 1 F; the NA vote takes no side
    assert verdict["error"] is None
    assert verdict["details"]["member_errors"] == 1
    bad = verdict["details"]["votes"][3]
    assert "model server exploded" in bad["error"] and bad["model"] == broken


async def test_a_member_with_an_unknown_model_votes_na(model) -> None:
    members = members_voting(model, "F", "F")
    out = await check([*members, "scripted:nobody-registered"])
    assert out["verdict"]["label"] == "F"
    assert "nobody-registered" in out["verdict"]["details"]["votes"][2]["error"]


async def test_all_members_failing_is_an_error_verdict(model) -> None:
    members = [model(f"b{i}", fail="down")[0] for i in range(4)]
    judge, calls = model("judge", answer="T")
    out = await check(members, judge=judge)
    verdict = out["verdict"]
    assert verdict["label"] == "NA"
    assert calls == [] and verdict["details"]["judge_called"] is False  # nothing to break
    assert verdict["error"].startswith("all 4 members failed")
    assert verdict["details"]["error_type"] == "RuntimeError"


async def test_three_members(model) -> None:
    out = await check(members_voting(model, "T", "F", "F"))
    assert out["verdict"]["label"] == "F"
    assert out["verdict"]["details"]["counts"] == {"T": 1, "F": 2, "NA": 0}


async def test_five_members_with_an_na_vote_tie_and_judge(model) -> None:
    members = members_voting(model, "T", "F", "maybe", "F", "T")
    judge, calls = model("judge", answer="F")
    out = await check(members, judge=judge)
    assert labels_of(out["verdict"]) == ["T", "F", "NA", "F", "T"]
    assert out["verdict"]["details"]["decision"] == "tie"
    assert out["verdict"]["label"] == "F" and len(calls) == 1


async def test_five_members_majority(model) -> None:
    out = await check(members_voting(model, "T", "T", "F", "T", "F"))
    assert out["verdict"]["label"] == "T"


async def test_votes_are_sorted_by_member_whatever_finishes_first(model) -> None:
    slow, _ = model("slow", answer="F", delay=0.15)
    fast, _ = model("fast", answer="T")
    mid, _ = model("mid", answer="T", delay=0.05)
    out = await check([slow, mid, fast])
    assert [v["model"] for v in out["verdict"]["details"]["votes"]] == [slow, mid, fast]
    assert [v["index"] for v in out["votes"]] == [0, 1, 2]


async def test_members_run_concurrently(model) -> None:
    members = [model(f"s{i}", answer="T" if i % 2 else "F", delay=0.2)[0] for i in range(4)]
    judge, _ = model("judge", answer="T", delay=0.2)
    await check(members)  # warm up imports and caches
    started = time.perf_counter()
    out = await check(members, judge=judge)
    elapsed = time.perf_counter() - started
    # Sequential members would need 0.8 s, plus 0.2 s for the judge on this 2-2 tie.
    assert out["verdict"]["details"]["judge_called"]
    assert elapsed < 0.75, f"a fact took {elapsed:.2f} s: members did not run concurrently"


async def test_recorded_votes_skip_the_members(model) -> None:
    members = members_voting(model, "T", "T", "F", "F")
    first = await check(members)
    judge, calls = model("judge", answer="F")
    member_calls = [SCRIPTED[f"m{i}"]().calls for i in range(4)]
    again = await graph.ainvoke(
        {"fact": FACT.as_input(), "votes": first["verdict"]["details"]["votes"]},
        context=ConsensusContext(members=members, judge=judge),
    )
    assert again["verdict"]["label"] == "F" and len(calls) == 1
    assert [len(c) for c in member_calls] == [1, 1, 1, 1]  # asked once, in the first run


async def test_recorded_votes_must_match_the_members(model) -> None:
    members = members_voting(model, "T", "T", "F")
    first = await check(members)
    with pytest.raises(ConsensusError, match="votes"):
        await graph.ainvoke({"fact": FACT.as_input(), "votes": first["votes"]},
                            context=ConsensusContext(members=list(reversed(members))))


async def test_a_dirty_triple_ends_before_the_members(model) -> None:
    members = members_voting(model, "T", "T")
    dirty = Fact.from_triple("bad", "Mini", ["a", "b", float("nan")])
    out = await check(members, fact=dirty)
    assert out["verdict"]["label"] == "NA"
    assert "object is missing" in out["verdict"]["error"]
    assert not out.get("votes")


async def test_member_settings_reach_the_member_graph(model, tmp_path) -> None:
    seen: list[str] = []

    class Recorder(SlowModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            seen.append(messages[-1].content)
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    register_scripted("rec", lambda: Recorder(answer="T", calls=[]))
    try:
        prompt = tmp_path / "mine.txt"
        prompt.write_text("CHECK {subject} / {predicate} / {object}", encoding="utf-8")
        out = await check(["scripted:rec", model("other")[0]], prompt=str(prompt))
    finally:
        SCRIPTED.pop("rec", None)
    assert out["verdict"]["label"] == "T"
    assert seen == ['CHECK "Paris" / "capital of" / "France"']


async def test_the_giv_method_runs_when_registered(model) -> None:
    pytest.importorskip("kgcheck.graphs.strategies.giv")
    members = members_voting(model, "T", "F", "F")
    out = await check(members, method="giv-z")
    assert out["verdict"]["label"] == "F"
    assert out["verdict"]["method"] == "GIV-Z"


# ---------------------------------------------------------------- settings and judges


def test_xray_shows_the_member_and_judge_subgraphs() -> None:
    nodes = set(graph.get_graph(xray=True).nodes)
    assert {"member:build_prompt", "member:ask_model", "judge:ask_model"} <= nodes
    assert {"dispatch", "tally"} <= set(graph.get_graph().nodes)


def test_build_for_another_method_uses_its_subgraph() -> None:
    pytest.importorskip("kgcheck.graphs.strategies.giv")
    nodes = set(build("giv-z").compile(name="consensus").get_graph(xray=True).nodes)
    # GIV's re-prompting loop shows inside both the member and the judge.
    assert {"member:reprompt", "member:give_up", "judge:reprompt"} <= nodes


def test_member_specs_from_slots_list_or_text() -> None:
    assert member_specs(ConsensusContext()) == [
        "replay:gemma2:9b", "replay:qwen2.5:7b", "replay:llama3.1:8b", "replay:mistral:7b"]
    assert member_specs(ConsensusContext(member_3="", member_4="")) == [
        "replay:gemma2:9b", "replay:qwen2.5:7b"]
    ctx = ConsensusContext(members="ollama:a:1, ollama:b:2,ollama:c")  # type: ignore[arg-type]
    assert member_specs(ctx) == ["ollama:a:1", "ollama:b:2", "ollama:c"]


@pytest.mark.parametrize(
    ("members", "message"),
    [(["replay:gemma2:9b"], "at least 2"),
     (["replay:gemma2:9b", "replay:gemma2:9b"], "repeated"),
     (["replay:gemma2:9b", "gemma2"], "provider:model")],
)
def test_bad_members_are_named(members: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        member_specs(ConsensusContext(members=members))


async def test_bad_method_lists_the_known_ones(model) -> None:
    with pytest.raises(ValueError, match="unknown strategy 'nope'; known: .*dka"):
        await check(members_voting(model, "T", "T"), method="nope")


def test_cons_up_and_down_pick_the_larger_sibling() -> None:
    members = ["replay:gemma2:9b", "replay:qwen2.5:7b", "replay:llama3.1:8b", "replay:mistral:7b"]
    ca = {"gemma2:9b": 0.919, "qwen2.5:7b": 0.861, "llama3.1:8b": 0.906, "mistral:7b": 0.938}
    assert resolve_judge("cons-up", members, alignment=ca) == "replay:mistral-nemo:12b"
    assert resolve_judge("cons-down", members, alignment=ca) == "replay:qwen2.5:14b"
    assert resolve_judge("none", members) is None
    assert resolve_judge("openai:gpt-4o-mini", members) == "openai:gpt-4o-mini"
    # A sibling that names its own provider keeps it.
    assert larger_sibling("ollama:gemma2:9b", {"gemma2:9b": "openai:gpt-4o"}) == "openai:gpt-4o"
    assert larger_sibling("ollama:gemma2:9b", DEFAULT_SIBLINGS) == "ollama:gemma2:27b"
    assert larger_sibling("ollama:x", "x=y,z=w") == "ollama:y"


def test_equal_alignment_picks_the_first_member() -> None:
    assert pick_member("cons-up", ["a:1", "a:2"], {"a:1": 0.9, "a:2": 0.9}) == "a:1"
    assert pick_member("cons-down", ["a:1", "a:2"], {"a:1": 0.9, "a:2": 0.9}) == "a:1"


@pytest.mark.parametrize(
    ("judge", "kwargs", "message"),
    [("cons-up", {}, "needs each member's alignment"),
     ("cons-down", {"alignment": {"replay:gemma2:9b": 0.9}}, "lacks member"),
     ("cons-up", {"alignment": {"replay:gemma2:9b": 0.9, "replay:x:1": 0.8},
                  "siblings": {"x:2": "y"}}, "no larger sibling known for replay:gemma2:9b"),
     ("gpt-4o", {}, "provider:model")],
)
def test_bad_judges_are_named(judge: str, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_judge(judge, ["replay:gemma2:9b", "replay:x:1"], **kwargs)


def test_alignment_from_text_mapping_or_summary_file(tmp_path) -> None:
    assert parse_alignment("replay:gemma2:9b=0.9, replay:qwen2.5:7b=0.8") == {
        "replay:gemma2:9b": 0.9, "replay:qwen2.5:7b": 0.8}
    summary = tmp_path / "summary.json"
    summary.write_text('{"n": 3, "alignment": {"a:1": 0.5, "a:2": 0.75}}', encoding="utf-8")
    assert parse_alignment(str(summary)) == {"a:1": 0.5, "a:2": 0.75}
    with pytest.raises(ConsensusError, match="not a number"):
        parse_alignment("a:1=high")
    with pytest.raises(ConsensusError, match="does not exist"):
        parse_alignment(str(tmp_path / "missing.json"))
    with pytest.raises(ConsensusError, match="key=value"):
        parse_alignment("a:1")


async def test_cons_up_in_the_graph_with_given_alignment(model) -> None:
    members = [model("small-a", answer="T")[0], model("small-b", answer="F")[0]]
    judge, calls = model("big-b", answer="F")
    out = await check(members, judge="cons-up", alignment="scripted:small-a=0.7,small-b=0.9",
                      siblings="small-a=big-a,small-b=big-b")
    assert out["plan"]["judge"] == judge and out["plan"]["judge_setting"] == "cons-up"
    assert out["verdict"]["label"] == "F" and len(calls) == 1


def test_settings_class_knows_both_field_sets() -> None:
    cls = settings_class(DKAContext)
    names = set(cls.__dataclass_fields__)
    assert {"members", "judge", "siblings", "alignment", "prompt", "temperature"} <= names
    assert cls().prompt == ""  # the method's own prompt unless set


def test_unknown_provider_in_members_is_a_value_error() -> None:
    with pytest.raises(UnknownModelError):
        member_specs(ConsensusContext(members=["nope:x", "replay:gemma2:9b"]))


@pytest.mark.parametrize(("value", "message"), [("{max_attempts: 5", "not valid JSON"),
                                                ("[1, 2]", "expected a mapping")])
def test_bad_member_settings_are_named(value: str, message: str) -> None:
    with pytest.raises(ConsensusError, match=f"member_settings: {message}"):
        member_values(ConsensusContext(member_settings=value))  # type: ignore[arg-type]
    assert member_values(ConsensusContext(member_settings='{"max_attempts": 5}',  # type: ignore[arg-type]
                                          temperature=0.2)) == {"max_attempts": 5,
                                                                "temperature": 0.2}
