"""Repeated runs: flips, entropy and the majority; no cached answer shared across repeats."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import entropy
from sklearn.metrics import f1_score

import kgcheck
from kgcheck.evals.stats.repeats import fact_stability
from kgcheck.providers.cache import answer_key
from tests.support.stubs import Behaviour, OpenAIStub

FACTS = [{"id": str(n), "subject": f"Person_{n}", "predicate": "bornIn", "object": "Paris",
          "label": label} for n, label in enumerate("TTFF", start=1)]
# Three repeats of the four facts, in order (concurrency 1): facts 1 and 3 flip once.
SCRIPT = ["T", "T", "F", "F",
          "F", "T", "F", "F",
          "T", "T", "T", "F"]


@pytest.fixture
def server(no_openai_env: None) -> Iterator[OpenAIStub]:
    with OpenAIStub(Behaviour(answer="T", tokens_in=30, tokens_out=1)) as stub:
        yield stub


def test_a_flipping_model_gives_flip_rates_entropy_and_the_majority(
        scripted: Callable[[str, list[str]], str], tmp_path: Path) -> None:
    spec = scripted("flipper", SCRIPT)
    result = kgcheck.run(facts=FACTS, model=spec, out=tmp_path / "run", repeats=3,
                         concurrency=1)
    records = {r["fact_id"]: r for r in result.records}
    assert {f: r["label"] for f, r in records.items()} == {"1": "T", "2": "T", "3": "F",
                                                           "4": "F"}
    assert records["1"]["details"]["repeats"]["labels"] == ["T", "F", "T"]
    assert records["3"]["details"]["repeats"]["labels"] == ["F", "F", "T"]
    for fid, counts in (("1", [2, 1, 0]), ("2", [3, 0, 0]), ("3", [1, 2, 0])):
        stability = records[fid]["details"]["repeats"]
        assert stability["entropy"] == pytest.approx(entropy(counts, base=2))
        assert stability["flip_rate"] == pytest.approx(1 - max(counts) / 3)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    section = summary["repeats"]
    assert section["count"] == 3 and section["flipped_facts"] == 2
    assert section["mean_flip_rate"] == pytest.approx((1 / 3 + 1 / 3) / 4)
    assert section["mean_entropy"] == pytest.approx(2 * entropy([2, 1], base=2) / 4)
    gold = [f["label"] for f in FACTS]
    per_repeat = [SCRIPT[i * 4:(i + 1) * 4] for i in range(3)]
    macro = [f1_score(gold, p, labels=["T", "F"], average="macro") for p in per_repeat]
    assert section["scores"]["macro_f1"]["values"] == pytest.approx(macro)
    assert section["scores"]["macro_f1"]["mean"] == pytest.approx(np.mean(macro))
    assert section["scores"]["macro_f1"]["sd"] == pytest.approx(np.std(macro, ddof=1))
    assert [f["fact_id"] for f in section["flipped"]] == ["1", "3"]
    # The summary scores the majority verdicts.
    assert summary["macro_f1"] == pytest.approx(1.0)
    assert (tmp_path / "run" / "repeats" / "3" / "verdicts.jsonl").is_file()


def test_repeats_never_reuse_a_cached_answer(server: OpenAIStub, tmp_path: Path) -> None:
    def run(out: Path) -> dict:
        return kgcheck.run(facts=FACTS, model="openai-compatible:stub-model", out=out,
                           settings={"base_url": server.url}, repeats=3).summary

    first = run(tmp_path / "a")
    assert len(server.calls()) == 3 * len(FACTS), "a repeat was served another's answer"
    assert first["cache"]["hits"] == 0
    # A second run of three repeats finds each repeat's own answers.
    second = run(tmp_path / "b")
    assert len(server.calls()) == 3 * len(FACTS)
    assert second["cache"]["hits"] == 3 * len(FACTS)
    assert second["tokens_in"] == first["tokens_in"] == 3 * 30 * len(FACTS)


def test_the_cache_key_holds_the_repeat_index() -> None:
    from langchain_core.messages import HumanMessage

    messages = [HumanMessage("Paris is in France.")]
    keys = {answer_key("ollama:m", messages, {"temperature": 1.0}, repeat=r)
            for r in (None, 0, 1, 2)}
    assert len(keys) == 4


def test_stability_of_one_fact_against_scipy() -> None:
    labels = ["T", "F", "NA", "T", "NEI", "T"]
    found = fact_stability(labels)
    assert found["counts"] == {"T": 3, "F": 1, "NA": 2}
    assert found["entropy"] == pytest.approx(entropy([3, 1, 2], base=2))
    assert found["flip_rate"] == pytest.approx(0.5) and found["majority"] == "T"
    assert fact_stability(["T", "F"])["majority"] == "NA"


def test_bad_repeats_get_one_clear_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kgcheck.cli import app

    result = CliRunner().invoke(app, ["run", "--dataset", "yago", "--limit", "2",
                                      "--repeats", "0", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "repeats must be a whole number of at least 1" in result.output
    result = CliRunner().invoke(app, ["run", "--dataset", "yago", "--limit", "2",
                                      "--repeats", "2", "--consensus",
                                      "replay:gemma2:9b,replay:qwen2.5:7b",
                                      "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "consensus" in result.output


def test_the_report_shows_the_repeats(scripted: Callable[[str, list[str]], str],
                                      tmp_path: Path) -> None:
    spec = scripted("flipper-report", SCRIPT)
    kgcheck.run(facts=FACTS, model=spec, out=tmp_path / "run", repeats=3, concurrency=1)
    # Facts given in memory: the report reads the folder, not the facts.
    kgcheck.report([tmp_path / "run"], tmp_path / "report", plots=False)
    tables = (tmp_path / "report" / "tables.md").read_text()
    section = tables.split("## Repeats")[1].split("\n## ")[0]
    assert "| run | 3 | 2 of 4 | 0.167 |" in section


def _local_model_missing() -> str | None:
    import importlib.util

    from kgcheck.providers import PROVIDERS

    if "local" not in PROVIDERS:
        return "no local provider in this kgcheck"
    if importlib.util.find_spec("xllamacpp") is None:
        return "the local extra (xllamacpp) is not installed"
    return None


@pytest.mark.skipif(_local_model_missing() is not None,
                    reason=str(_local_model_missing()))
def test_the_local_model_flips_at_temperature_one(tmp_path: Path) -> None:
    facts = [{"id": str(n), "subject": s, "predicate": p, "object": o, "label": lab}
             for n, (s, p, o, lab) in enumerate([
                 ("Paris", "isCapitalOf", "France", "T"), ("Rome", "isCapitalOf", "Spain", "F"),
                 ("Berlin", "isLocatedIn", "Germany", "T"), ("Alan_Alda", "bornIn", "Tokyo", "F"),
                 ("Marie_Curie", "hasWonPrize", "Nobel_Prize", "T"),
                 ("Oslo", "isCapitalOf", "Sweden", "F")], start=1)]
    # Constrained to the verdict's format, each answer is a T or F (free text from a 135M
    # model parses as NA, which would hide the flips).
    result = kgcheck.run(facts=facts, model="local:smollm2-135m", out=tmp_path / "run",
                         repeats=4, settings={"temperature": 1.0, "constrain": True})
    section = result.summary["repeats"]
    print("local model, 6 facts x 4 repeats at temperature 1:", section["mean_flip_rate"],
          section["flipped_facts"])
    assert section["count"] == 4 and section["mean_flip_rate"] > 0
    raws = [r["raws"] for r in result.records]
    assert all(len(r) == 4 for r in raws)
