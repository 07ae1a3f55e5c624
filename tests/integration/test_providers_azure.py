"""Azure OpenAI (``azure:<deployment>``) against a stub speaking Azure's path, query and key."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.graphs.strategies.dka import DKAContext, graph
from kgcheck.providers import ModelSettings, UnknownModelError, resolve_model
from tests.support.stubs import AzureStub, Behaviour
from tests.support.stubs.azure import API_VERSION, KEY

FACT = Fact(id="10019", dataset="YAGO", subject="Jerzy_Jurandot", predicate="isMarriedTo",
            object="Stefania_Grodzieńska", label=True)


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch) -> Iterator[AzureStub]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_AD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with AzureStub(Behaviour(answer="T", tokens_in=33, tokens_out=1),
                   deployments=("factcheck-4o-mini",)) as stub:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", stub.url)
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_API_VERSION", API_VERSION)
        yield stub


async def test_azure_calls_the_deployment_path_with_api_version_and_key(azure: AzureStub) -> None:
    model = resolve_model("azure:factcheck-4o-mini", ModelSettings(max_retries=0))
    reply = await model.ainvoke([HumanMessage("Is Paris in France?")])
    assert reply.content == "T"
    (call,) = azure.calls()
    assert call.path == "/openai/deployments/factcheck-4o-mini/chat/completions"
    assert azure.queries() == [{"api-version": [API_VERSION]}]
    assert call.headers["api-key"] == KEY
    assert "authorization" not in call.headers
    assert call.body["messages"] == [{"role": "user", "content": "Is Paris in France?"}]
    assert (call.body["temperature"], call.body["top_p"]) == (0.75, 0.9)


async def test_a_dka_verdict_through_azure_counts_tokens(azure: AzureStub) -> None:
    out = await graph.ainvoke({"fact": FACT.as_input()},
                              context=DKAContext(model="azure:factcheck-4o-mini"))
    verdict = out["verdict"]
    assert (verdict["label"], verdict["model"]) == ("T", "azure:factcheck-4o-mini")
    assert (verdict["tokens_in"], verdict["tokens_out"]) == (33, 1)


def test_missing_azure_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example.openai.azure.com")
    with pytest.raises(UnknownModelError,
                       match="azure:d1 needs AZURE_OPENAI_API_KEY, OPENAI_API_VERSION"):
        resolve_model("azure:d1", ModelSettings())


async def test_unknown_deployment_and_wrong_key_are_settings_errors(
        azure: AzureStub, monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve_model("azure:no-such-deployment", ModelSettings(max_retries=0))
    with pytest.raises(UnknownModelError, match="azure:no-such-deployment at http://127.0.0.1"
                       ".*deployment for this resource does not exist"):
        await model.ainvoke([HumanMessage("?")])
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "wrong-key-abcdef")
    model = resolve_model("azure:factcheck-4o-mini", ModelSettings(max_retries=0))
    with pytest.raises(UnknownModelError, match="the key was refused") as caught:
        await model.ainvoke([HumanMessage("?")])
    assert "wrong-key-abcdef" not in str(caught.value)


def test_run_through_azure_prices_the_deployment(azure: AzureStub, tmp_path) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text("subject,predicate,object,label\nParis,capitalOf,France,1\n"
                  "Paris,capitalOf,Spain,0\n")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"chat": {"factcheck-4o-mini": {
        "promptPrice": 0.15, "completionPrice": 0.6}}}))
    result = CliRunner().invoke(app, [
        "run", "--triples", str(kg), "--model", "azure:factcheck-4o-mini", "--out",
        str(tmp_path / "r"), "--no-progress", "--concurrency", "1", "--pricing", str(prices)])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert (summary["tokens_in"], summary["tokens_out"]) == (66, 2)
    # 66 tokens in at 0.15 $/1k and 2 out at 0.6 $/1k.
    assert summary["cost_usd"] == pytest.approx(66 * 0.15 / 1000 + 2 * 0.6 / 1000)
    assert summary["cost"]["by_model"]["azure:factcheck-4o-mini"]["tokens_in"] == 66
    assert "cost $0.0111" in result.output
    run_json = (tmp_path / "r" / "run.json").read_text()
    assert KEY not in run_json and KEY not in (tmp_path / "r" / "verdicts.jsonl").read_text()


async def test_azure_calls_are_bounded_and_sent_once_per_run_as_openai_ones(
        azure: AzureStub) -> None:
    # Azure is the same SDK as OpenAI: the client retries inside one call, so the whole
    # call is bounded by every attempt, and each model has its own HTTP clients.
    model = resolve_model("azure:factcheck-4o-mini",
                          ModelSettings(timeout=2.0, max_retries=3))
    openai_like = resolve_model("openai-compatible:stub",
                                ModelSettings(timeout=2.0, max_retries=3,
                                              base_url=azure.url))
    assert model._bound() == openai_like._bound() > 2.0 * 4
    assert model.http_async_client is not None and model.http_client is not None
    for n in range(2):  # each call reaches the server once, through the model's own client
        await model.ainvoke([HumanMessage(f"Is Paris in France? {n}")])
    assert len(azure.calls()) == 2
