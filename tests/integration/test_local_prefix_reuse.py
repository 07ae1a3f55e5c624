"""Prompt-prefix reuse on the real llama.cpp server (SmolLM2-135M), on a few facts.

By default the server reuses the part of a prompt it computed for the request before
(``cache_prompt``); ``local_prefix_reuse=false`` computes every prompt afresh.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

import kgcheck
from kgcheck.data.datasets import load_facts
from kgcheck.providers import ModelSettings, local

pytest.importorskip("xllamacpp")

MODEL = "local:smollm2-135m"
# A shared instruction long enough that its reuse is unmistakable.
INSTRUCTIONS = "You check facts from a knowledge graph. Reply T or F. " * 8
# Facts whose subjects start differently: each one's prompt parts from the one before at the
# same token, the end of what every fact shares (WARM is asked first, not compared).
WARM, FACTS = "10019", ("10053", "10065", "10143")


async def cached_tokens(settings: ModelSettings) -> list[int]:
    model = local.build("smollm2-135m", settings)
    messages = [SystemMessage(INSTRUCTIONS), HumanMessage("Paris | capitalOf | France")]
    counts = []
    for _ in range(2):
        reply = await model.ainvoke(messages)
        counts.append(reply.usage_metadata["input_token_details"]["cache_read"])
    return counts


async def test_the_default_reuses_the_prompt_prefix_and_strict_mode_does_not(
        local_server) -> None:
    first, second = await cached_tokens(ModelSettings(temperature=0.0, max_tokens=2))
    # The server's own count: the second call found most of its prompt computed.
    assert second > 80
    assert await cached_tokens(ModelSettings(temperature=0.0, max_tokens=2,
                                             local_prefix_reuse=False)) == [0, 0]


async def test_verdicts_of_the_same_facts_in_two_orders_agree_by_default(local_server) -> None:
    yago = {f.id: f for f in load_facts("yago")}
    settings = {"temperature": 0.0, "max_tokens": 4, "constrain": True}

    async def in_order(ids: tuple[str, ...]) -> dict[str, tuple]:
        verdicts = await kgcheck.acheck([yago[i] for i in (WARM, *ids)], "giv-f", MODEL,
                                        concurrency=1, cache=False, **settings)
        return {v.fact_id: (v.label, v.confidence, v.raws) for v in verdicts[1:]}

    forward = await in_order(FACTS)
    backward = await in_order(FACTS[::-1])
    assert set(forward) == set(FACTS)
    # Labels and confidences alike: the same bits whatever the order.
    assert forward == backward
