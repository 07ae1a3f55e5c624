"""Real HTTP from the model stubs (gzip, chunked bodies, redirects) and constrained output.

Each provider is called as a run calls it, plain and streamed, against its stub on
127.0.0.1; the stub counts what it sent, so a test sees that the reply was compressed or
chunked and that the provider still read the answer and its token counts.
"""

from __future__ import annotations

import gzip
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage

import kgcheck
from kgcheck.data.facts import Fact
from kgcheck.graphs.calls import ask
from kgcheck.graphs.parsing import ANSWER_FORMATS, read_with
from kgcheck.graphs.registry import get_strategy
from kgcheck.providers import ModelSettings, resolve_model
from kgcheck.providers.constraints import ConstraintIgnoredWarning
from tests.support.stubs import AzureStub, Behaviour, OllamaStub, OpenAIStub
from tests.support.stubs.azure import API_VERSION, KEY

FACT = Fact(id="10019", dataset="YAGO", subject="Jerzy_Jurandot", predicate="isMarriedTo",
            object="Stefania_Grodzieńska", label=True)
QUESTION = [HumanMessage("Is Paris in France? Answer T or F.")]


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "OLLAMA_HOST",
                 "AZURE_OPENAI_AD_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=["ollama", "openai-compatible", "azure"])
def provider(request: pytest.FixtureRequest,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Any, ModelSettings]]:
    """A stub of each protocol, the spec that reaches it and the settings to use."""
    behaviour = Behaviour(answer="T", tokens_in=31, tokens_out=2)
    if request.param == "ollama":
        with OllamaStub(behaviour) as stub:
            yield "ollama:gemma2:9b", stub, ModelSettings(base_url=stub.url, max_retries=0)
    elif request.param == "openai-compatible":
        with OpenAIStub(behaviour) as stub:
            yield ("openai-compatible:stub-model", stub,
                   ModelSettings(base_url=stub.url, max_retries=0))
    else:
        with AzureStub(behaviour, deployments=("gpt-4o-mini",)) as stub:
            monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", stub.url)
            monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
            monkeypatch.setenv("OPENAI_API_VERSION", API_VERSION)
            yield "azure:gpt-4o-mini", stub, ModelSettings(max_retries=0)


def test_the_stub_compresses_only_what_the_client_accepts() -> None:
    with OpenAIStub(Behaviour(answer="T")) as stub:
        body = {"model": "stub-model", "messages": [{"role": "user", "content": "hi"}]}
        with httpx.Client() as client:
            raw = client.send(client.build_request(
                "POST", stub.url + "/chat/completions", json=body,
                headers={"Accept-Encoding": "gzip"}), stream=True)
            compressed = b"".join(raw.iter_raw())
        assert raw.headers["content-encoding"] == "gzip"
        assert raw.headers["transfer-encoding"] == "chunked"
        assert b'"content": "T"' in gzip.decompress(compressed)
        plain = httpx.post(stub.url + "/chat/completions", json=body,
                           headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers
        assert plain.json()["choices"][0]["message"]["content"] == "T"


async def test_gzip_and_chunked_replies_are_decoded(provider) -> None:
    spec, stub, settings = provider
    model = resolve_model(spec, settings)
    reply = await model.ainvoke(QUESTION)
    assert reply.content == "T"
    assert reply.usage_metadata["input_tokens"] == 31
    assert stub.gzipped >= 1 and stub.chunked >= 1


async def test_gzip_streams_are_decoded_chunk_by_chunk(provider) -> None:
    spec, stub, settings = provider
    stub.behaviour.chunk_chars = 1
    stub.behaviour.answer = "Judgment: T"
    model = resolve_model(spec, settings)
    pieces = [chunk.content async for chunk in model.astream(QUESTION)]
    assert "".join(str(p) for p in pieces) == "Judgment: T"
    assert len([p for p in pieces if p]) >= 5, "the stream arrived in one piece"
    assert stub.gzipped >= 1


async def test_redirects_are_followed(provider) -> None:
    spec, stub, settings = provider
    stub.behaviour.redirect = True
    reply = await resolve_model(spec, settings).ainvoke(QUESTION)
    assert reply.content == "T"
    assert stub.redirected >= 1
    (call,) = stub.calls()
    assert call.body and call.body.get("messages"), "the redirected POST kept its body"


# Constrained output.

async def test_constrained_calls_carry_the_answer_format(provider) -> None:
    spec, stub, settings = provider
    stub.behaviour.answer = '{"verdict": "F"}'
    ctx = get_strategy("dka").make_context(model=spec, constrain=True,
                                           base_url=settings.base_url, max_retries=0)
    reply = await ask(ctx, QUESTION, FACT)
    assert read_with(ctx.parser, reply.text).label == "F"
    (call,) = stub.calls()
    schema = ANSWER_FORMATS["strict"].schema
    if spec.startswith("ollama:"):
        assert call.body["format"] == schema
    else:
        assert call.body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": schema, "strict": True}}


async def test_unconstrained_calls_carry_no_format(provider) -> None:
    spec, stub, settings = provider
    ctx = get_strategy("dka").make_context(model=spec, base_url=settings.base_url,
                                           max_retries=0)
    await ask(ctx, QUESTION, FACT)
    (call,) = stub.calls()
    assert "format" not in call.body and "response_format" not in call.body


async def test_only_verdict_calls_are_constrained(provider) -> None:
    spec, stub, settings = provider
    ctx = get_strategy("rag").make_context(model=spec, constrain=True,
                                           base_url=settings.base_url, max_retries=0)
    await ask(ctx, QUESTION, FACT, "questions")
    await ask(ctx, QUESTION, FACT)
    free, held = stub.calls()
    assert "format" not in free.body and "response_format" not in free.body
    assert "output" in str(held.body.get("format") or held.body.get("response_format"))


def test_a_provider_without_constraints_warns_once_and_answers() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verdicts = kgcheck.check([FACT], "dka", "replay:gemma2:9b", constrain=True)
        kgcheck.check([FACT], "dka", "replay:gemma2:9b", constrain=True)
    assert verdicts[0].label in ("T", "F")
    notices = [w for w in caught if issubclass(w.category, ConstraintIgnoredWarning)]
    assert len(notices) == 1
    assert "replay: models cannot be asked for constrained output" in str(notices[0].message)


async def test_constrained_answers_are_cached_apart(tmp_path) -> None:
    with OpenAIStub(Behaviour(answer='{"verdict": "T"}')) as stub:
        settings = {"base_url": stub.url}
        for constrain in (False, True, True):
            await kgcheck.arun(facts=[FACT], strategy="dka",
                               model="openai-compatible:stub-model",
                               settings={**settings, "constrain": constrain},
                               out=tmp_path / f"run-{constrain}", fresh=True)
        # One call each for free and held answers; the third run is the cache's.
        assert len(stub.calls()) == 2
