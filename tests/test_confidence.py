"""Verdict confidence: log-probabilities over OpenAI's wire format, votes, and its scores."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import numpy as np
import pytest
from langchain_core.messages import AIMessage
from sklearn.calibration import calibration_curve
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    brier_score_loss,
    roc_auc_score,
)

from kgcheck.data.facts import Fact
from kgcheck.data.truths import run_truths
from kgcheck.evals.calibration import (
    calibration_report,
    precision_coverage,
    review_threshold,
    truth_pairs,
)
from kgcheck.graphs.explain import logprob_confidence
from kgcheck.graphs.registry import get_strategy
from kgcheck.providers.cache import use_cache
from kgcheck.review.session import select
from tests.stubs import Behaviour, OpenAIStub

FACT = Fact(id="10019", dataset="YAGO", subject="Jerzy_Jurandot", predicate="isMarriedTo",
            object="Stefania_Grodzieńska", label=True)


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIStub]:
    with OpenAIStub() as stub:
        yield stub


pytestmark = pytest.mark.usefixtures("no_openai_env")


def normalised(chosen: float, alternatives: list[tuple[str, float]], side: str) -> float:
    """P(T) / (P(T) + P(F)) from the numbers the server sent, computed by hand."""
    # Every spelling the parser reads as T or F counts for its side ("t" is T, "The" is not).
    t_words, f_words = {"T", "t", "true", "True", " T", "yes"}, {"F", "f", "false", "False", " F", "no"}
    mass = {"T": 0.0, "F": 0.0}
    seen = set()
    for token, logprob in [(side, chosen), *alternatives]:
        if token in seen:
            continue
        seen.add(token)
        if token in t_words:
            mass["T"] += math.exp(logprob)
        elif token in f_words:
            mass["F"] += math.exp(logprob)
    return mass["T"] / (mass["T"] + mass["F"])


async def _dka(server: OpenAIStub, **settings) -> dict:
    strategy = get_strategy("dka")
    ctx = strategy.make_context(model="openai-compatible:stub-model", base_url=server.url,
                                max_retries=0, **settings)
    out = await strategy.compile().ainvoke({"fact": FACT.as_input()}, context=ctx)
    return out["verdict"]


@pytest.mark.parametrize(("answer", "chosen", "alternatives"), [
    ("T", -0.105, [("T", -0.105), ("F", -2.4), ("True", -4.1), ("The", -5.0), ("t", -6.0)]),
    ("F", -0.6, [("F", -0.6), ("T", -0.8), ("N", -3.0)]),
])
async def test_confidence_is_the_normalised_probability_the_server_gave(
        server, answer, chosen, alternatives):
    server.behaviour = Behaviour(answer=answer,
                                 logprobs=[(answer, chosen, alternatives)])
    verdict = await _dka(server)
    body = server.calls()[-1].body
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert verdict["label"] == answer
    assert verdict["confidence_source"] == "logprobs"
    assert verdict["confidence"] == pytest.approx(
        normalised(chosen, alternatives, answer), abs=1e-6)


async def test_no_logprobs_no_confidence(server):
    server.behaviour = Behaviour(answer="T", logprobs=[("T", -0.1, [("T", -0.1)])])
    verdict = await _dka(server, logprobs="off")
    assert "logprobs" not in server.calls()[-1].body
    assert verdict["confidence"] is None and verdict["confidence_source"] is None


async def test_cached_answer_keeps_its_confidence(server, tmp_path):
    server.behaviour = Behaviour(answer="F", logprobs=[("F", -0.3, [("F", -0.3), ("T", -1.5)])])
    with use_cache(tmp_path / "cache.sqlite"):
        first = await _dka(server)
        asked = len(server.calls())
        second = await _dka(server)
    assert len(server.calls()) == asked  # served from the cache
    assert second["confidence"] == first["confidence"] == pytest.approx(
        math.exp(-1.5) / (math.exp(-1.5) + math.exp(-0.3)), abs=1e-6)


def test_the_verdict_token_is_read_inside_json_and_before_the_reason():
    tokens = [{"token": '{"', "logprob": 0.0, "top": []},
              {"token": "output", "logprob": 0.0, "top": []},
              {"token": '":"', "logprob": 0.0, "top": []},
              {"token": "yes", "logprob": -0.2, "top": [["yes", -0.2], ["no", -1.8]]},
              {"token": '"}', "logprob": 0.0, "top": []},
              {"token": "\nReason: it is not false", "logprob": 0.0, "top": []}]
    expected = math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.8))
    assert logprob_confidence(tokens, "T") == pytest.approx(expected)
    # A label that the verdict part does not hold is never read from the reason.
    assert logprob_confidence(tokens, "F", upto=len('{"output":"yes"}')) is None
    assert logprob_confidence(tokens, "NEI") is None


async def test_self_consistency_confidence_is_the_vote_share(scripted):
    model = scripted("sc-share", ["T", "F", "T", "NEI", "T"])
    strategy = get_strategy("dka-sc")
    ctx = strategy.make_context(model=model, samples=5)
    out = await strategy.compile().ainvoke({"fact": FACT.as_input()}, context=ctx)
    verdict = out["verdict"]
    assert verdict["label"] == "T"
    assert (verdict["confidence"], verdict["confidence_source"]) == (0.75, "self-consistency")
    assert sum(1 for t in verdict["conversation"] if t["role"] == "assistant") == 5


async def test_self_consistency_with_logprobs_averages_them(scripted):
    def reply(text: str, p_true: float) -> AIMessage:
        lp = {"T": math.log(p_true), "F": math.log(1 - p_true)}
        return AIMessage(text, response_metadata={"logprobs": {"content": [
            {"token": text, "logprob": lp[text],
             "top_logprobs": [{"token": k, "logprob": v} for k, v in lp.items()]}]}})

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    from tests.scripted import SCRIPTED, register_scripted

    replies = iter([reply("T", 0.9), reply("T", 0.7), reply("F", 0.2)])
    register_scripted("sc-lp", lambda: GenericFakeChatModel(messages=replies))
    try:
        strategy = get_strategy("dka-sc")
        ctx = strategy.make_context(model="scripted:sc-lp", samples=3)
        out = await strategy.compile().ainvoke({"fact": FACT.as_input()}, context=ctx)
    finally:
        SCRIPTED.pop("sc-lp", None)
    verdict = out["verdict"]
    assert verdict["confidence_source"] == "logprobs"
    assert verdict["confidence"] == pytest.approx((0.9 + 0.7 + 0.2) / 3, abs=1e-6)


async def test_consensus_confidence_is_the_vote_share(scripted):
    members = [scripted(f"cm{i}", [a]) for i, a in enumerate(["T", "T", "F", "T"])]
    from kgcheck.graphs.consensus.graph import ConsensusContext, graph

    out = await graph.ainvoke({"fact": FACT.as_input()},
                              context=ConsensusContext(members=members, judge="none"))
    verdict = out["verdict"]
    assert (verdict["label"], verdict["confidence"]) == ("T", 0.75)
    assert verdict["confidence_source"] == "consensus"
    assert {t["member"] for t in verdict["conversation"]} == set(members)


RNG = np.random.default_rng(7)
TRUTH = RNG.integers(0, 2, 200).tolist()
SCORES = np.clip(np.asarray(TRUTH) * 0.35 + RNG.random(200) * 0.65, 0, 1).round(3).tolist()


def test_scores_equal_scikit_learn():
    report = calibration_report(TRUTH, SCORES, bins=10)
    assert report["auroc"] == pytest.approx(roc_auc_score(TRUTH, SCORES))
    assert report["auprc"] == pytest.approx(average_precision_score(TRUTH, SCORES))
    assert report["brier"] == pytest.approx(brier_score_loss(TRUTH, SCORES))
    prob_true, prob_pred = calibration_curve(TRUTH, SCORES, n_bins=10, strategy="uniform")
    rows = report["reliability"]
    assert [r["fraction_true"] for r in rows] == pytest.approx(prob_true.tolist())
    assert [r["mean_confidence"] for r in rows] == pytest.approx(prob_pred.tolist())


def test_ece_equals_a_direct_computation():
    y, p = np.asarray(TRUTH), np.asarray(SCORES)
    ece = 0.0
    for lower in np.arange(10) / 10:
        upper = lower + 0.1
        inside = (p > lower) & (p <= upper) if lower > 0 else (p <= upper)
        if inside.any():
            ece += inside.sum() / len(p) * abs(y[inside].mean() - p[inside].mean())
    assert calibration_report(TRUTH, SCORES)["ece"] == pytest.approx(ece)


def test_precision_coverage_equals_accuracy_of_the_most_certain():
    curve = precision_coverage(TRUTH, SCORES)
    p = np.asarray(SCORES)
    order = np.argsort(-np.maximum(p, 1 - p), kind="stable")
    for k in (1, 20, 57, 200):
        kept = order[:k]
        expected = accuracy_score(np.asarray(TRUTH)[kept], (p[kept] >= 0.5).astype(int))
        assert curve[k - 1]["coverage"] == pytest.approx(k / 200)
        assert curve[k - 1]["precision"] == pytest.approx(expected)


def test_threshold_sends_the_least_certain_share_to_review():
    threshold = review_threshold(SCORES, 0.2)
    sure = np.maximum(np.asarray(SCORES), 1 - np.asarray(SCORES))
    assert np.mean(sure < threshold) == pytest.approx(0.2, abs=0.02)


def test_review_labels_count_before_gold_and_order_by_uncertainty():
    records = [{"fact_id": "a", "confidence": 0.9, "gold": "F", "label": "T"},
               {"fact_id": "b", "confidence": 0.55, "gold": "T", "label": "T"},
               {"fact_id": "c", "confidence": None, "gold": "T", "label": "T"},
               {"fact_id": "d", "confidence": 0.1, "gold": None, "label": "F"},
               {"fact_id": "e", "label": "NEI"}]
    # A skipped decision is no truth (review_decisions keeps T/F alone): b keeps its gold.
    truths = run_truths(None, records, review={"a": "T"})
    assert truths.sources == {"a": "review", "b": "gold", "c": "gold"}
    truth, scores = truth_pairs(records, truths.labels)
    assert (truth, scores) == ([1, 1, 0][:2], [0.9, 0.55])
    queue = [r["fact_id"] for r in select(records, order="uncertainty")]
    assert queue == ["e", "b", "a", "d", "c"]


def test_summary_of_a_run_carries_calibration(tmp_path):
    from kgcheck.runs.runner import RunInfo, summarize

    records = [{"fact_id": str(i), "label": "T" if s >= 0.5 else "F", "confidence": s,
                "gold": "T" if t else "F", "predicate": "p"}
               for i, (t, s) in enumerate(zip(TRUTH, SCORES, strict=True))]
    summary = summarize(records, RunInfo("d", "dka", "DKA", ["m"]), seconds=1.0, ran=1)
    section = json.loads(json.dumps(summary["calibration"]))
    assert section["sources"] == {"none": 200}
    assert section["scores"]["auroc"] == pytest.approx(roc_auc_score(TRUTH, SCORES))
    assert section["scores"]["precision_coverage"][-1]["coverage"] == 1.0


async def test_real_llamacpp_server_confidence_is_its_normalised_probability(tmp_path):
    """local:smollm2-135m: kgcheck's own llama.cpp server, asked again directly."""
    pytest.importorskip("xllamacpp")
    import httpx

    from kgcheck.providers import ModelSettings
    from kgcheck.providers.llama_server import running
    from kgcheck.providers.local import server_key

    prompt = tmp_path / "yes-no.txt"
    prompt.write_text("Answer the question with yes or no.\n[data]\n"
                      "Is this fact true: {subject} | {predicate} | {object}?")
    strategy = get_strategy("dka")
    ctx = strategy.make_context(model="local:smollm2-135m", prompt=str(prompt),
                                parser="yes-no-json", temperature=0.0, max_tokens=1,
                                constrain=False)
    out = await strategy.compile().ainvoke({"fact": FACT.as_input()}, context=ctx)
    verdict = out["verdict"]
    assert verdict["label"] in ("T", "F") and verdict["confidence_source"] == "logprobs"
    server = running(server_key("smollm2-135m", ModelSettings.of(ctx)))
    assert server is not None
    # Ask the server again, directly, with the same messages: greedy decoding gives the
    # same token and the same probabilities.
    messages = [{"role": t["role"], "content": t["content"]}
                for t in verdict["conversation"][:-1]]
    async with httpx.AsyncClient(timeout=60, headers={
            "Authorization": f"Bearer {server.api_key}"}) as client:
        reply = (await client.post(f"{server.url}/chat/completions", json={
            "model": "smollm2", "messages": messages, "temperature": 0, "max_tokens": 1,
            "logprobs": True, "top_logprobs": 5})).json()
    token = reply["choices"][0]["logprobs"]["content"][0]
    mass = {"T": 0.0, "F": 0.0}
    for alt in token["top_logprobs"]:
        side = {"yes": "T", "no": "F"}.get(alt["token"].strip().lower())
        if side:
            mass[side] += math.exp(alt["logprob"])
    assert verdict["confidence"] == pytest.approx(mass["T"] / (mass["T"] + mass["F"]),
                                                  abs=1e-5)


def test_report_scores_confidences_and_draws_the_figures(tmp_path):
    from typer.testing import CliRunner

    from kgcheck.cli import app
    from kgcheck.evals.report import build_report

    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--dataset", "yago", "--limit", "30", "--out",
                                      str(run), "--no-progress"])
    assert result.exit_code == 0, result.output
    path = run / "verdicts.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    # The first YAGO facts are all true: give them both classes, and scores.
    records = [{**r, "gold": "T" if t else "F", "confidence": s, "confidence_source": "logprobs"}
               for r, t, s in zip(records, TRUTH, SCORES, strict=False)]
    scores = {r["fact_id"]: r["confidence"] for r in records}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    written = build_report([run], tmp_path / "report")
    truth = [1 if r["gold"] == "T" else 0 for r in records]
    expected = roc_auc_score(truth, [scores[r["fact_id"]] for r in records])
    text = written.markdown.read_text()
    assert "## Coverage and confidence" in text and f"{expected:.2f}" in text
    names = {p.name for p in written.plots}
    assert {"reliability-run.png", "precision-coverage-run.png"} <= names


# Held to an answer format, only the tokens the grammar allows at the verdict's place
# count: "True" and "The" may lead the raw probabilities, but the model could not write them.
HELD_TOKENS = {
    "T": ("T", -0.9, [("True", -0.5), ("T", -0.9), ("F", -1.2), ("The", -2.0)]),
    "F": ("F", -0.9, [("True", -0.3), ("F", -0.9), ("T", -1.2), ("false", -1.5)]),
}


@pytest.mark.parametrize("wire", ["openai", "ollama"])
@pytest.mark.parametrize("answer", ["T", "F"])
async def test_held_confidence_counts_only_the_tokens_the_format_allows(wire, answer,
                                                                        monkeypatch):
    from tests.stubs import OllamaStub

    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    token, chosen, alternatives = HELD_TOKENS[answer]
    behaviour = Behaviour(answer=answer, logprobs=[(token, chosen, alternatives)])
    stub_class, spec = ((OpenAIStub, "openai-compatible:stub-model") if wire == "openai"
                        else (OllamaStub, "ollama:gemma2:9b"))
    with stub_class(behaviour) as stub:
        strategy = get_strategy("dka")
        ctx = strategy.make_context(model=spec, base_url=stub.url, max_retries=0,
                                    constrain=True, logprobs="on")
        verdict = (await strategy.compile().ainvoke({"fact": FACT.as_input()},
                                                    context=ctx))["verdict"]
        body = stub.calls()[-1].body
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    other = {"T": "F", "F": "T"}[answer]
    own = dict((t, lp) for t, lp in alternatives)
    p_own = math.exp(own[answer]) / (math.exp(own[answer]) + math.exp(own[other]))
    assert verdict["label"] == answer and verdict["confidence_source"] == "logprobs"
    # The confidence is P(T): the verdict's own label is the likelier of the two.
    expected = p_own if answer == "T" else 1 - p_own
    assert verdict["confidence"] == pytest.approx(expected, abs=1e-6)
    assert (verdict["confidence"] >= 0.5) == (answer == "T")


def test_held_json_verdict_token_may_carry_its_quotes():
    from kgcheck.graphs.parsing import ANSWER_FORMATS

    fmt = ANSWER_FORMATS["yes-no-json"]
    tokens = [{"token": '{"output": "', "logprob": 0.0, "top": []},
              {"token": 'no"}', "logprob": -0.4,
               "top": [['no"}', -0.4], ['yes"}', -1.4], ["yes", -2.0], [" yes", -0.1],
                       ["No", -0.2]]}]
    # " yes" and "No" are not what the grammar lets the model write there; "yes" is.
    expected = (math.exp(-1.4) + math.exp(-2.0)) / (
        math.exp(-1.4) + math.exp(-2.0) + math.exp(-0.4))
    assert logprob_confidence(tokens, "F", fmt=fmt) == pytest.approx(expected)
    assert logprob_confidence(tokens, "T", fmt=fmt) is None


def test_held_confidence_bounds_an_unlisted_other_choice():
    from kgcheck.graphs.parsing import ANSWER_FORMATS

    # "T" is not among the listed alternatives: it is at most as likely as "X", the least
    # likely listed, so P(T) is that bound's share, not 0 (a certainty nothing shows).
    tokens = [{"token": "F", "logprob": -0.2,
               "top": [["F", -0.2], ["The", -1.0], ["X", -3.0]]}]
    expected = math.exp(-3.0) / (math.exp(-3.0) + math.exp(-0.2))
    assert logprob_confidence(tokens, "F", fmt=ANSWER_FORMATS["strict"]) == pytest.approx(
        expected)
