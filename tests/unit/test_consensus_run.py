"""The consensus runner: summaries, the two cons-up/cons-down phases, and resume."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from kgcheck.data.facts import Fact
from kgcheck.data.runfolder import RunError
from kgcheck.graphs.consensus.graph import ConsensusError
from kgcheck.graphs.registry import get_strategy
from kgcheck.runs.consensus import VOTES_DIR, run_consensus
from kgcheck.runs.runner import RunInfo
from tests.support.scripted import SCRIPTED, register_scripted

# Votes per fact (subject) of members a, b, c, d. CA_M over the 4 decided facts:
# a 1.0, b 1.0, c 0.75, d 0.5; S3 and S5 are 2-2 ties.
VOTES = {
    "S0": "TTTT",
    "S1": "TTTF",
    "S2": "FFFT",
    "S3": "TFTF",
    "S4": "FFTF",
    "S5": "TTFF",
}
GOLD = {"S0": True, "S1": True, "S2": False, "S3": True, "S4": False, "S5": False}
JUDGE_ANSWERS = {"S3": "T", "S5": "F"}
FACTS = [Fact(id=f"f{s}", dataset="Mini", subject=s, predicate="p", object="o", label=GOLD[s])
         for s in VOTES]
SIBLINGS = "a=big-a,b=big-b,c=big-c,d=big-d"


class ByFactModel(BaseChatModel):
    """Answer by the fact's subject found in the prompt; count the calls per subject."""

    answers: dict[str, str]
    calls: Any = None

    @property
    def _llm_type(self) -> str:
        return "by-fact-test"

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        text = str(messages[-1].content)
        # Prompts quote the fact's terms: the subject appears as "S0".
        subject = next(s for s in self.answers if f'"{s}"' in text)
        self.calls.append(subject)
        return ChatResult(generations=[ChatGeneration(
            message=AIMessage(content=self.answers[subject]))])

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return self._answer(messages)

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None,
                         **kwargs: Any) -> ChatResult:
        return self._answer(messages)


@pytest.fixture
def panel() -> Iterator[dict[str, list[str]]]:
    """Register members a..d and judges big-a..big-d; yield each model's call log."""
    calls: dict[str, list[str]] = {}
    names = []
    for i, name in enumerate("abcd"):
        answers = {s: v[i] for s, v in VOTES.items()}
        calls[name] = []
        register_scripted(name, lambda a=answers, c=calls[name]: ByFactModel(answers=a, calls=c))
        names.append(name)
        judge = f"big-{name}"
        calls[judge] = []
        register_scripted(judge, lambda c=calls[judge]: ByFactModel(answers=JUDGE_ANSWERS,
                                                                     calls=c))
        names.append(judge)
    yield calls
    for name in names:
        SCRIPTED.pop(name, None)


MEMBERS = [f"scripted:{n}" for n in "abcd"]


async def run(out: Path, judge: str, *, resume: bool = False, **values: Any):
    """Run consensus of members a..d over the six facts."""
    info = RunInfo(dataset="Mini", strategy="dka", method="DKA", models=MEMBERS, judge=judge, source="test")
    return await run_consensus(
        FACTS, strategy=get_strategy("dka"), members=MEMBERS, judge=judge,
        values={"data_dir": "", **values}, info=info, out_dir=out, concurrency=3,
        resume=resume, show_progress=False,
    )


def read(path: Path) -> list[dict[str, Any]]:
    """The records of a verdicts file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


async def test_fixed_judge_run_summarizes_ties_alignment_and_judge_calls(panel, tmp_path) -> None:
    result = await run(tmp_path, "scripted:big-c")
    summary = result.summary
    assert summary["n"] == 6 and summary["errors"] == 0
    assert summary["tie_rate"] == round(2 / 6, 4) and summary["ties"] == 2
    assert summary["alignment"] == {"scripted:a": 1.0, "scripted:b": 1.0, "scripted:c": 0.75,
                                    "scripted:d": 0.5}
    assert summary["judge_calls"] == 2 and summary["judge_decided"] == 2
    assert summary["judge_model"] == "scripted:big-c" and summary["judge_source"] == "fixed"
    # The judge saw only the two ties.
    assert sorted(panel["big-c"]) == ["S3", "S5"]
    labels = {r["fact_id"]: r["label"] for r in read(tmp_path / "verdicts.jsonl")}
    assert labels == {"fS0": "T", "fS1": "T", "fS2": "F", "fS3": "T", "fS4": "F", "fS5": "F"}
    assert summary["f1_true"] == 1.0 and summary["f1_false"] == 1.0
    assert not (tmp_path / VOTES_DIR).exists()
    stored = json.loads((tmp_path / "summary.json").read_text())
    assert stored["alignment"] == summary["alignment"]


async def test_no_judge_leaves_ties_na(panel, tmp_path) -> None:
    result = await run(tmp_path, "none")
    assert result.summary["judge_calls"] == 0 and result.summary["na"] == 2
    assert all(not calls for name, calls in panel.items() if name.startswith("big-"))


@pytest.mark.parametrize(("judge", "expected"), [("cons-up", "big-a"), ("cons-down", "big-d")])
async def test_measured_cons_judge_runs_two_phases(panel, tmp_path, judge: str,
                                                   expected: str) -> None:
    result = await run(tmp_path, judge, siblings=SIBLINGS)
    summary = result.summary
    assert summary["judge"] == judge and summary["judge_source"] == "measured"
    assert summary["judge_model"] == f"scripted:{expected}"
    assert summary["judge_calls"] == 2 and sorted(panel[expected]) == ["S3", "S5"]
    # Each member was asked once per fact, in phase 1 only.
    assert all(sorted(panel[m]) == sorted(VOTES) for m in "abcd")
    phase1 = read(tmp_path / VOTES_DIR / "verdicts.jsonl")
    assert len(phase1) == 6 and all(not r["details"]["judge_called"] for r in phase1)
    final = read(tmp_path / "verdicts.jsonl")
    assert {r["fact_id"]: r["details"]["judge_setting"] for r in final} == {
        f.id: judge for f in FACTS}
    run_info = json.loads((tmp_path / "run.json").read_text())
    assert run_info["judge"] == judge
    assert run_info["settings"]["judge_model"] == f"scripted:{expected}"


async def test_given_alignment_skips_the_vote_phase(panel, tmp_path) -> None:
    result = await run(tmp_path, "cons-down", siblings=SIBLINGS,
                       alignment="a=0.5,scripted:b=0.9,c=0.9,d=0.9")
    assert result.summary["judge_model"] == "scripted:big-a"
    assert result.summary["judge_source"] == "given"
    assert not (tmp_path / VOTES_DIR).exists()


async def test_both_phases_resume(panel, tmp_path) -> None:
    first = await run(tmp_path, "cons-up", siblings=SIBLINGS)
    votes_file = tmp_path / VOTES_DIR / "verdicts.jsonl"
    final_file = tmp_path / "verdicts.jsonl"
    # Drop two facts from phase 1 and three from phase 2, as if the run had been killed.
    votes_file.write_text("".join(json.dumps(r) + "\n" for r in read(votes_file)[:4]))
    final_file.write_text("".join(json.dumps(r) + "\n" for r in read(final_file)[:3]))
    for calls in panel.values():
        calls.clear()
    with pytest.raises(RunError, match="pass resume=True"):
        await run(tmp_path, "cons-up", siblings=SIBLINGS)
    again = await run(tmp_path, "cons-up", siblings=SIBLINGS, resume=True)
    assert again.summary["votes_phase"]["ran_this_time"] == 2
    assert again.summary["ran_this_time"] == 3
    assert all(len(panel[m]) == 2 for m in "abcd")
    assert again.summary["n"] == 6
    assert {r["fact_id"]: r["label"] for r in again.records} == {
        r["fact_id"]: r["label"] for r in first.records}
    assert again.summary["f1_true"] == first.summary["f1_true"]


async def test_resume_refuses_another_judge(panel, tmp_path) -> None:
    await run(tmp_path, "cons-up", siblings=SIBLINGS)
    with pytest.raises(RunError, match="judge"):
        await run(tmp_path, "scripted:big-b", resume=True)


async def test_replay_judge_without_recordings_fails_before_any_fact(tmp_path) -> None:
    members = ["replay:gemma2:9b", "replay:qwen2.5:7b"]
    info = RunInfo(dataset="FactBench", strategy="dka", method="DKA", models=members, judge="replay:gemma2:27b")
    with pytest.raises(ConsensusError, match="no recorded DKA tie-breaks for FactBench"):
        await run_consensus(FACTS[:1], strategy=get_strategy("dka"), members=members,
                            judge="replay:gemma2:27b", values={}, info=info, out_dir=tmp_path,
                            show_progress=False)
    assert not (tmp_path / "verdicts.jsonl").exists()


def test_run_values_split_into_consensus_and_member_settings() -> None:
    pytest.importorskip("kgcheck.graphs.strategies.giv")
    from kgcheck.graphs.consensus.graph import member_values
    from kgcheck.runs.consensus import consensus_context

    values = {"model": "replay:gemma2:9b", "data_dir": "/data", "prompt": "mine.txt",
              "temperature": 0.1, "max_attempts": 5, "siblings": "a=b"}
    ctx = consensus_context(get_strategy("giv-z"), MEMBERS, "none", values)
    assert ctx.members == MEMBERS and ctx.method == "giv-z" and ctx.siblings == "a=b"
    assert ctx.member_settings == {"max_attempts": 5}
    member = get_strategy("giv-z").make_context(**member_values(ctx), model=MEMBERS[0])
    assert (member.prompt, member.temperature, member.data_dir) == ("mine.txt", 0.1, "/data")
    assert member.max_attempts == 5 and member.model == MEMBERS[0]
    # Unchanged shared settings leave the strategy's own defaults alone.
    plain = get_strategy("giv-f").make_context(
        **member_values(consensus_context(get_strategy("giv-f"), MEMBERS, "none", {})))
    assert plain.prompt == "giv-f.txt"


async def test_bad_settings_fail_before_any_fact(panel, tmp_path) -> None:
    with pytest.raises(ConsensusError, match="lacks member"):
        await run(tmp_path, "cons-up", siblings=SIBLINGS, alignment="a=0.9,b=0.8")
    info = RunInfo(dataset="Mini", strategy="dka", method="DKA", models=MEMBERS[:1], judge="none")
    with pytest.raises(ConsensusError, match="at least 2"):
        await run_consensus(FACTS, strategy=get_strategy("dka"), members=MEMBERS[:1],
                            judge="none", values={}, info=info, out_dir=tmp_path,
                            show_progress=False)
    assert not (tmp_path / "verdicts.jsonl").exists()
    assert all(not calls for calls in panel.values())
