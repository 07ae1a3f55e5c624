"""ChatOpenAI through resolve_model against a stub OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage

from kgcheck.data.facts import Fact
from kgcheck.graphs.calls import ask
from kgcheck.graphs.strategies.dka import DKAContext, graph
from kgcheck.providers import ModelSettings, UnknownModelError, resolve_model
from tests.support.stubs import Behaviour, OpenAIStub

KEY = "sk-kgcheck-test-0123456789abcdef"
FACT = Fact(id="10019", dataset="YAGO", subject="Jerzy_Jurandot", predicate="isMarriedTo",
            object="Stefania_Grodzieńska", label=True)


@pytest.fixture
def server() -> Iterator[OpenAIStub]:
    with OpenAIStub(Behaviour(answer="F", tokens_in=40, tokens_out=1)) as stub:
        yield stub


pytestmark = pytest.mark.usefixtures("no_openai_env")


async def test_compatible_server_gets_the_study_sampling(server: OpenAIStub) -> None:
    model = resolve_model("openai-compatible:gemma-2-9b-it", ModelSettings(base_url=server.url))
    reply = await model.ainvoke([HumanMessage("Is Paris in France?")])
    assert reply.content == "F"
    (call,) = server.calls()
    assert call.path == "/v1/chat/completions"
    body = call.body
    assert body["model"] == "gemma-2-9b-it"
    assert body["messages"] == [{"role": "user", "content": "Is Paris in France?"}]
    assert (body["temperature"], body["top_p"]) == (0.75, 0.9)
    # vLLM and llama.cpp read max_tokens and the study's top_k / repetition penalty.
    assert body["max_tokens"] == 512
    assert body["top_k"] == 40
    assert body["repetition_penalty"] == body["repeat_penalty"] == 1.1
    assert "max_completion_tokens" not in body
    assert call.headers["authorization"] == "Bearer not-needed"


async def test_openai_sends_the_key_and_only_openai_parameters(
        server: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = resolve_model("openai:gpt-4o-mini", ModelSettings(base_url=server.url))
    reply = await model.ainvoke([HumanMessage("?")])
    assert reply.content == "F"
    (call,) = server.calls()
    assert call.headers["authorization"] == f"Bearer {KEY}"
    assert call.body["model"] == "gpt-4o-mini"
    assert call.body["max_completion_tokens"] == 512
    assert (call.body["temperature"], call.body["top_p"]) == (0.75, 0.9)
    assert not {"top_k", "repeat_penalty", "repetition_penalty", "max_tokens"} & set(call.body)


def test_openai_needs_a_key() -> None:
    with pytest.raises(UnknownModelError, match="OPENAI_API_KEY"):
        resolve_model("openai:gpt-4o-mini")


def test_compatible_needs_a_url() -> None:
    with pytest.raises(UnknownModelError, match="base_url"):
        resolve_model("openai-compatible:any")


async def test_compatible_url_from_environment(server: OpenAIStub,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    reply = await resolve_model("openai-compatible:m").ainvoke([HumanMessage("?")])
    assert reply.content == "F"


async def test_sse_stream_with_usage(server: OpenAIStub) -> None:
    server.behaviour.answer = "False: they never met."
    server.behaviour.chunk_chars = 2
    model = resolve_model("openai-compatible:m", ModelSettings(base_url=server.url))
    full: AIMessageChunk | None = None
    async for chunk in model.astream([HumanMessage("?")]):
        full = chunk if full is None else full + chunk
    assert full is not None
    assert full.content == "False: they never met."
    assert (full.usage_metadata["input_tokens"], full.usage_metadata["output_tokens"]) == (40, 1)
    body = server.calls()[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_ask_reports_the_wire_token_counts(server: OpenAIStub) -> None:
    ctx = DKAContext(model="openai-compatible:m", base_url=server.url)
    reply = await ask(ctx, [HumanMessage("?")], FACT)
    assert (reply.text, reply.tokens_in, reply.tokens_out) == ("F", 40, 1)


async def test_dka_verdict_through_openai(server: OpenAIStub,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ctx = DKAContext(model="openai:gpt-4o-mini", base_url=server.url)
    out = await graph.ainvoke({"fact": FACT.as_input()}, context=ctx)
    verdict = out["verdict"]
    assert (verdict["label"], verdict["tokens_in"], verdict["tokens_out"]) == ("F", 40, 1)
    assert verdict["model"] == "openai:gpt-4o-mini"
    assert KEY not in str(verdict)
