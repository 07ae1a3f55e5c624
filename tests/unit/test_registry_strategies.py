"""The strategy registry and its worked extension example, dka-sc (self-consistency)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner
from typing_extensions import TypedDict

from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.graphs.context import Context
from kgcheck.graphs.registry import (
    STRATEGIES,
    Strategy,
    UnknownStrategyError,
    get_strategy,
    register,
    strategies,
)
from kgcheck.graphs.strategies.dka_sc import DKASCContext, SelfConsistencyError

FACT = Fact(id="5", dataset="YAGO", subject="Alexander_III_of_Russia", predicate="isMarriedTo",
            object="Maria_Feodorovna__Dagmar_of_Denmark_")


def test_builtin_strategies_include_the_extension_example() -> None:
    known = strategies()
    assert {"dka", "dka-sc"} <= set(known)
    sc = known["dka-sc"]
    assert sc.context is DKASCContext
    assert sc.label == "DKA-SC"  # its verdicts' method
    assert sc.replays == "DKA"  # replay answers its samples with the recorded DKA answers
    assert "majority" in sc.description


def test_unknown_strategy_lists_the_known_ones() -> None:
    with pytest.raises(UnknownStrategyError, match=r"unknown strategy 'nope'; known: .*dka-sc"):
        get_strategy("nope")
    assert issubclass(UnknownStrategyError, ValueError)
    assert get_strategy(" DKA-SC ").name == "dka-sc"


async def test_dka_sc_takes_the_majority_of_k_samples(scripted) -> None:
    strategy = get_strategy("dka-sc")
    model = scripted("sc-majority", ["F", "T", "T", "Maybe.", "T"])
    out = await strategy.compile().ainvoke(
        {"fact": FACT.as_input()}, context=strategy.make_context(model=model, samples=5),
        output_keys=["verdict", "messages"])
    verdict = out["verdict"]
    assert verdict["label"] == "T"
    assert verdict["method"] == "DKA-SC"
    assert verdict["attempts"] == 5 and len(verdict["raws"]) == 5
    assert sorted(verdict["details"]["samples"]) == ["F", "NA", "T", "T", "T"]
    assert verdict["details"]["votes"] == {"T": 3, "F": 1, "NA": 1}
    # Every sample saw the same DKA prompt: its instructions, then the quoted fact.
    assert '"Alexander III of Russia"' in out["messages"][1].content


async def test_dka_sc_even_split_is_na_and_failed_samples_do_not_vote(scripted) -> None:
    strategy = get_strategy("dka-sc")
    out = await strategy.compile().ainvoke(
        {"fact": FACT.as_input()},
        context=strategy.make_context(model=scripted("sc-tie", ["T", "F"]), samples=2))
    assert out["verdict"]["label"] == "NA"
    assert out["verdict"]["details"]["tie"] is True

    # Only two answers scripted for three samples: the third call fails and is not a vote.
    out = await strategy.compile().ainvoke(
        {"fact": FACT.as_input()},
        context=strategy.make_context(model=scripted("sc-short", ["F", "F"]), samples=3))
    verdict = out["verdict"]
    assert verdict["label"] == "F"
    assert verdict["details"]["votes"] == {"T": 0, "F": 2, "NA": 1}
    assert len(verdict["details"]["errors"]) == 1


async def test_dka_sc_with_replay_votes_the_recorded_answer() -> None:
    strategy = get_strategy("dka-sc")
    out = await strategy.compile().ainvoke({"fact": FACT.as_input()},
                                           context=strategy.make_context(samples=3))
    assert out["verdict"]["label"] == "T"
    assert out["verdict"]["raws"] == ["T", "T", "T"]


def test_dka_sc_rejects_settings_it_cannot_use() -> None:
    with pytest.raises(SelfConsistencyError, match="temperature 0.0: self-consistency"):
        DKASCContext(temperature=0.0)
    with pytest.raises(SelfConsistencyError, match=r"samples 0: expected a whole number"):
        DKASCContext(samples=0)
    assert issubclass(SelfConsistencyError, ValueError)


class EchoState(TypedDict, total=False):
    fact: dict
    verdict: dict


@dataclass(kw_only=True)
class EchoContext(Context):
    """Settings of a strategy that answers a fixed label."""

    METHOD: ClassVar[str] = "ECHO"

    answer: str = field(default="T", metadata={"description": "The label to answer."})


async def _echo(state: EchoState, runtime) -> dict:
    answer = runtime.context.answer if runtime.context else "F"
    return {"verdict": {"fact_id": state["fact"].get("id", "adhoc"), "label": answer,
                        "method": "ECHO", "model": runtime.context.model, "raws": [answer],
                        "attempts": 1, "seconds": 0.0, "error": None, "details": {}}}


def _build_echo(context):
    builder = StateGraph(EchoState, context_schema=context)
    builder.add_node("answer", _echo)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder


@pytest.fixture
def echo_strategy():
    register(Strategy("echo", EchoContext, _build_echo, description="Answers a fixed label."))
    yield get_strategy("echo")
    STRATEGIES.unregister("echo")


async def test_a_registered_strategy_runs_with_its_defaults(echo_strategy) -> None:
    out = await echo_strategy.compile().ainvoke({"fact": FACT.as_input()},
                                                context=echo_strategy.make_context())
    assert out["verdict"]["label"] == "T"
    ctx = echo_strategy.make_context(answer="F", unknown_key=1)
    assert ctx.answer == "F"


def test_a_name_registered_twice_is_an_error(echo_strategy) -> None:
    with pytest.raises(ValueError, match="strategy 'echo' is already registered"):
        register(Strategy("echo", EchoContext, _build_echo))


def test_a_strategy_needs_a_verdict_label() -> None:
    @dataclass(kw_only=True)
    class Unlabelled(Context):
        pass

    with pytest.raises(ValueError, match="sets no METHOD"):
        register(Strategy("unlabelled", Unlabelled, _build_echo))


def test_a_registered_strategy_is_listed_and_drawn_by_the_cli(echo_strategy) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["graph", "list"])
    assert listed.exit_code == 0, listed.output
    assert "echo" in listed.output and "dka-sc" in listed.output
    drawn = runner.invoke(app, ["graph", "draw", "echo", "--format", "mermaid"])
    assert drawn.exit_code == 0, drawn.output
    assert "answer(answer)" in drawn.output


async def test_swapping_a_node_as_the_extending_guide_shows(scripted) -> None:
    # docs/guides/extending.md's example, verbatim: DKA's wiring with another `decide` node.
    from dataclasses import dataclass
    from typing import ClassVar

    from langgraph.graph import END, START, StateGraph

    from kgcheck.graphs import verdicts
    from kgcheck.graphs.context import bind, context_of
    from kgcheck.graphs.parsing import read_verdict
    from kgcheck.graphs.registry import Strategy, register
    from kgcheck.graphs.routing import then, unless_decided
    from kgcheck.graphs.state import GraphInput, GraphOutput, read_fact
    from kgcheck.graphs.strategies import dka

    @dataclass(kw_only=True)
    class YesNoContext(dka.DKAContext):
        METHOD: ClassVar[str] = "DKA-YN"  # the label its verdicts carry
        # REPLAYS stays "DKA": replay: models answer it with the study's DKA answers.

    async def decide_yes_no(state, runtime, *, context=YesNoContext):
        """Read "yes"/"no" answers as T/F; anything else goes to the strict parser."""
        ctx = context_of(runtime, context)
        text = state["calls"][-1]["text"]
        label = {"yes": "T", "no": "F"}.get(text.strip().strip(".!").lower())
        return {"verdict": verdicts.answered(read_fact(state), ctx.METHOD, ctx.model,
                                             label or read_verdict(text).label, state["calls"])}

    def build(context=YesNoContext):
        builder = StateGraph(dka.DKAState, context_schema=context, input_schema=GraphInput,
                             output_schema=GraphOutput)
        builder.add_node("build_prompt", bind(dka.build_prompt, context))
        builder.add_node("ask_model", bind(dka.ask_model, context))
        builder.add_node("decide", bind(decide_yes_no, context))
        builder.add_edge(START, "build_prompt")
        builder.add_conditional_edges("build_prompt", unless_decided, then("ask_model"))
        builder.add_conditional_edges("ask_model", unless_decided, then("decide"))
        builder.add_edge("decide", END)
        return builder

    register(Strategy("dka-yes-no", YesNoContext, build,
                      description="DKA that also reads yes/no answers."))
    try:
        strategy = get_strategy("dka-yes-no")
        graph = strategy.compile()
        for answer, label in (("Yes.", "T"), ("no", "F"), ("F", "F"), ("perhaps", "NA")):
            model = scripted(f"yes-no-{label}-{answer}", [answer])
            out = await graph.ainvoke({"fact": FACT.as_input()},
                                      context=strategy.make_context(model=model))
            assert out["verdict"]["label"] == label, answer
            assert out["verdict"]["method"] == "DKA-YN"
        # Replay serves it the study's DKA answer.
        out = await graph.ainvoke({"fact": FACT.as_input()}, context=strategy.make_context())
        assert out["verdict"]["label"] == "T"
    finally:
        STRATEGIES.unregister("dka-yes-no")
