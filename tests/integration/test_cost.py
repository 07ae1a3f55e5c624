"""Cost: tokens to money with the pricing file, and ``--dry-run`` before any call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.graphs.prompting import fill_prompt
from kgcheck.graphs.registry import get_strategy
from kgcheck.graphs.strategies.dka import PROMPT_FIELDS
from kgcheck.providers.pricing import PricingError, cost_summary, default_pricing, load_pricing
from kgcheck.runs.dry_run import CHARS_PER_TOKEN, count_tokens, estimate, tokenizer_name
from tests.support.stubs import Behaviour, OpenAIStub

runner = CliRunner()
FACTS = [Fact(id=str(n), dataset="kg", subject=s, predicate="capitalOf", object=o)
         for n, (s, o) in enumerate((("Paris", "France"), ("Rome", "Italy"), ("Oslo", "Peru")))]


@pytest.fixture
def server() -> Iterator[OpenAIStub]:
    with OpenAIStub(Behaviour(answer="T", tokens_in=50, tokens_out=2)) as stub:
        yield stub


def test_shipped_prices_and_a_cost_summary() -> None:
    prices = default_pricing()
    assert prices.price("openai:gpt-4o-mini").prompt == pytest.approx(0.00015)
    assert prices.price("ollama:gemma2:9b").prompt == 0.0
    assert prices.price("ollama:phi3:mini").completion == 0.0  # local, unlisted
    assert prices.price("replay:anything").completion == 0.0
    assert prices.price("openai-compatible:my-own-model") is None
    records = [{"model": "openai:gpt-4o-mini", "tokens_in": 1000, "tokens_out": 100}] * 3
    cost = cost_summary(records, ["openai:gpt-4o-mini"])
    assert cost["cost_usd"] == pytest.approx(3 * (0.00015 + 0.1 * 0.0006))
    assert cost["cost"]["by_model"]["openai:gpt-4o-mini"]["tokens_in"] == 3000
    unknown = cost_summary(records, ["openai-compatible:mine"])
    assert unknown["cost_usd"] is None and unknown["cost"]["unpriced"] == ["openai-compatible:mine"]
    # No tokens counted at all: no cost, rather than a false 0.
    assert cost_summary([{"tokens_in": None}], ["openai:gpt-4o-mini"])["cost_usd"] is None


def test_consensus_votes_are_priced_per_member() -> None:
    record = {"model": "a,b", "tokens_in": 30, "tokens_out": 3, "details": {"votes": [
        {"model": "openai:gpt-4o", "tokens_in": 10, "tokens_out": 1},
        {"model": "openai:gpt-4o-mini", "tokens_in": 20, "tokens_out": 2}]}}
    cost = cost_summary([record], ["openai:gpt-4o", "openai:gpt-4o-mini"])
    by_model = cost["cost"]["by_model"]
    assert by_model["openai:gpt-4o"]["usd"] == pytest.approx((10 * 0.0025 + 1 * 0.01) / 1000)
    assert by_model["openai:gpt-4o-mini"]["tokens_in"] == 20


@pytest.mark.parametrize(("text", "message"), [
    ("not json", "not JSON"),
    ('{"models": {}}', 'expected {"chat"'),
    ('{"chat": {"m": {"promptPrice": "x"}}}', "model 'm' needs numeric promptPrice"),
])
def test_bad_pricing_files_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(PricingError, match=message) as caught:
        load_pricing(path)
    assert str(path) in str(caught.value)
    with pytest.raises(PricingError, match="not found"):
        load_pricing(tmp_path / "missing.json")


def test_estimate_counts_the_filled_prompts() -> None:
    strategy = get_strategy("dka")
    ctx = strategy.make_context(model="openai:gpt-4o-mini")
    found = estimate(FACTS, {"openai:gpt-4o-mini": ctx}, done=["2"])
    assert (found.facts, found.calls, found.max_calls) == (2, 2, 2)
    expected = sum(count_tokens(fill_prompt("dka.txt", PROMPT_FIELDS, f)) for f in FACTS[:2])
    assert found.tokens_in == expected > 0
    assert found.max_tokens_out == 2 * 512
    assert found.cost_in_usd == pytest.approx(expected * 0.00015 / 1000, abs=1e-6)
    assert found.max_cost_usd == pytest.approx(found.cost_in_usd + 1024 * 0.0006 / 1000,
                                               abs=1e-6)
    if tokenizer_name().startswith("characters"):
        text = fill_prompt("dka.txt", PROMPT_FIELDS, FACTS[0])
        assert count_tokens(text) == -(-len(text) // CHARS_PER_TOKEN)


def test_estimate_per_strategy_bounds_calls() -> None:
    for name, calls, at_most in (("giv-f", 3, 9), ("dka-sc", 15, 15), ("rag", 9, 9)):
        ctx = get_strategy(name).make_context(model="ollama:gemma2:9b")
        found = estimate(FACTS, {"ollama:gemma2:9b": ctx})
        assert (found.calls, found.max_calls) == (calls, at_most), name
        assert found.max_cost_usd == 0.0  # a local model


def test_dry_run_prints_the_estimate_and_calls_nothing(tmp_path: Path,
                                                       server: OpenAIStub) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text("subject,predicate,object\n" + "".join(
        f"{f.subject},{f.predicate},{f.object}\n" for f in FACTS))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"chat": {"mine": {"promptPrice": 1.0,
                                                    "completionPrice": 2.0}}}))
    out = tmp_path / "run"
    args = ["run", "--triples", str(kg), "--model", "openai-compatible:mine", "--base-url",
            server.url, "--out", str(out), "--no-progress", "--pricing", str(prices)]
    result = runner.invoke(app, [*args, "--dry-run"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "dry run: 3 facts to check" in text
    assert "total: 3 calls (at most 3)" in text and "tokens counted with" in text
    assert server.calls() == [] and not (out / "verdicts.jsonl").exists()
    planned = kgcheck.dry_run(triples=kg, model="openai-compatible:mine",
                               settings={"base_url": server.url}, pricing=prices)
    assert f"{planned.tokens_in:,} input tokens" in text
    assert planned.cost_in_usd == pytest.approx(planned.tokens_in / 1000)
    # The real run then costs what the server counted, at the given prices.
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert len(server.calls()) == 3
    assert summary["cost_usd"] == pytest.approx((150 * 1.0 + 6 * 2.0) / 1000)
    assert summary["cost"]["pricing"] == str(prices)
    # A resume's dry run counts only what is left.
    again = runner.invoke(app, [*args, "--dry-run", "--resume"])
    assert "dry run: 0 facts to check" in " ".join(again.output.split())


def test_bad_pricing_option_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--dataset", "factbench", "--limit", "2", "--pricing",
                                 str(tmp_path / "nope.json"), "--dry-run"])
    assert result.exit_code == 2
    assert "pricing file" in result.output and "not found" in result.output


def test_a_damaged_tiktoken_cache_falls_back_to_characters(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    from kgcheck.runs import dry_run as cost

    pytest.importorskip("tiktoken")
    cached = tmp_path / hashlib.sha1(cost.TIKTOKEN_URL.encode()).hexdigest()
    cached.write_bytes(b"not an encoding")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    cost._tiktoken_encoder.cache_clear()
    try:
        # Never a download: the damaged file is refused before tiktoken sees it.
        assert cost._tiktoken_encoder() is None
        assert tokenizer_name().startswith("characters / 4")
        assert count_tokens("abcdefghi") == 3
        assert cached.read_bytes() == b"not an encoding"
    finally:
        cost._tiktoken_encoder.cache_clear()


def test_the_runner_and_exports_build_no_graph_at_import() -> None:
    # Tracing wraps the graphs' nodes only when they are added after it starts, and the CLI
    # imports the runner before it starts tracing: pricing must not pull in a strategy.
    import subprocess
    import sys

    code = ("import sys, kgcheck.runs.runner, kgcheck.evals.export, kgcheck.providers.pricing; "
            "print(sorted(m for m in sys.modules if m.startswith('kgcheck.graphs.strategies')))")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
