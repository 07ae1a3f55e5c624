"""ChatOllama through resolve_model against a stub Ollama server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from langchain_core.messages import HumanMessage

from kgcheck.data.facts import Fact
from kgcheck.graphs.calls import ask
from kgcheck.graphs.strategies.dka import DKAContext, graph
from kgcheck.providers import ModelSettings, resolve_model
from tests.support.stubs import Behaviour, OllamaStub

STUDY_OPTIONS = {"temperature": 0.75, "top_p": 0.9, "top_k": 40, "num_predict": 512,
                 "repeat_penalty": 1.1}
FACT = Fact(id="10019", dataset="YAGO", subject="Jerzy_Jurandot", predicate="isMarriedTo",
            object="Stefania_Grodzieńska", label=True)


@pytest.fixture
def ollama() -> Iterator[OllamaStub]:
    with OllamaStub(Behaviour(answer="T", tokens_in=31, tokens_out=3)) as stub:
        yield stub


async def test_answer_arrives_with_the_study_sampling(ollama: OllamaStub) -> None:
    model = resolve_model("ollama:gemma2:9b", ModelSettings(base_url=ollama.url))
    reply = await model.ainvoke([HumanMessage("Is Paris in France? Answer T or F.")])
    assert reply.content == "T"
    (call,) = ollama.calls()
    assert call.path == "/api/chat"
    assert call.body["model"] == "gemma2:9b"
    assert call.body["stream"] is True
    assert call.body["options"] == STUDY_OPTIONS
    assert call.body["messages"] == [{"role": "user",
                                      "content": "Is Paris in France? Answer T or F."}]


async def test_streamed_chunks_are_joined(ollama: OllamaStub) -> None:
    ollama.behaviour.answer = "True: Jurandot married Grodzieńska in 1946."
    ollama.behaviour.chunk_chars = 3
    model = resolve_model("ollama:gemma2:9b", ModelSettings(base_url=ollama.url))
    reply = await model.ainvoke([HumanMessage("?")])
    assert reply.content == "True: Jurandot married Grodzieńska in 1946."
    assert reply.usage_metadata["input_tokens"] == 31
    assert reply.usage_metadata["output_tokens"] == 3


async def test_sampling_can_be_overridden(ollama: OllamaStub) -> None:
    options = ModelSettings(base_url=ollama.url, temperature=0.0, top_p=1.0, top_k=1,
                           max_tokens=8, repeat_penalty=1.0)
    await resolve_model("ollama:gemma2:9b", options).ainvoke([HumanMessage("?")])
    assert ollama.calls()[0].body["options"] == {
        "temperature": 0.0, "top_p": 1.0, "top_k": 1, "num_predict": 8, "repeat_penalty": 1.0}


async def test_non_streamed_reply_keeps_token_counts(ollama: OllamaStub) -> None:
    model = resolve_model("ollama:gemma2:9b", ModelSettings(base_url=ollama.url))
    reply = await model.ainvoke([HumanMessage("?")], stream=False)
    assert ollama.calls()[0].body["stream"] is False
    assert reply.content == "T"
    assert (reply.usage_metadata["input_tokens"], reply.usage_metadata["output_tokens"]) == (31, 3)


def test_server_comes_from_ollama_host(ollama: OllamaStub,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # OLLAMA_HOST is often written without a scheme, as Ollama's own server reads it.
    monkeypatch.setenv("OLLAMA_HOST", ollama.url.removeprefix("http://"))
    reply = resolve_model("ollama:gemma2:9b").invoke([HumanMessage("?")])
    assert reply.content == "T"
    assert len(ollama.calls()) == 1


async def test_ask_reports_the_wire_token_counts(ollama: OllamaStub) -> None:
    ctx = DKAContext(model="ollama:gemma2:9b", base_url=ollama.url)
    reply = await ask(ctx, [HumanMessage("?")], FACT)
    assert reply.text == "T"
    assert (reply.tokens_in, reply.tokens_out) == (31, 3)
    assert reply.seconds > 0


async def test_dka_verdict_carries_answer_and_tokens(ollama: OllamaStub) -> None:
    ctx = DKAContext(model="ollama:gemma2:9b", base_url=ollama.url)
    out = await graph.ainvoke({"fact": FACT.as_input()}, context=ctx)
    verdict = out["verdict"]
    assert verdict["label"] == "T"
    assert verdict["raw"] == "T"
    assert verdict["error"] is None
    assert (verdict["tokens_in"], verdict["tokens_out"]) == (31, 3)
    prompt = ollama.calls()[0].body["messages"][-1]["content"]
    assert "Jerzy Jurandot" in prompt and "Stefania Grodzieńska" in prompt


async def test_dka_reads_a_false_answer(ollama: OllamaStub) -> None:
    ollama.behaviour.answer = "F"
    ctx = DKAContext(model="ollama:gemma2:9b", base_url=ollama.url)
    out = await graph.ainvoke({"fact": FACT.as_input()}, context=ctx)
    assert out["verdict"]["label"] == "F"


async def test_model_is_reused_within_an_event_loop(ollama: OllamaStub) -> None:
    options = ModelSettings(base_url=ollama.url)
    first = resolve_model("ollama:gemma2:9b", options)
    assert resolve_model("ollama:gemma2:9b", options) is first
    assert resolve_model("ollama:gemma2:9b", ModelSettings(base_url=ollama.url,
                                                          temperature=0.1)) is not first
    for _ in range(2):
        assert (await first.ainvoke([HumanMessage("?")])).content == "T"
    assert len(ollama.calls()) == 2


def test_each_event_loop_gets_its_own_client(ollama: OllamaStub) -> None:
    options = ModelSettings(base_url=ollama.url)

    async def call() -> object:
        model = resolve_model("ollama:gemma2:9b", options)
        assert (await model.ainvoke([HumanMessage("?")])).content == "T"
        return model

    # An HTTP client bound to a closed loop would fail here; each loop builds its own.
    assert asyncio.run(call()) is not asyncio.run(call())
    assert len(ollama.calls()) == 2
