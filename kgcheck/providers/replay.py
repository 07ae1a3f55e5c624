"""The ``replay`` provider: a chat model that answers with the study's recorded answers.

Which fact is being asked travels in the call's metadata (``kgcheck.providers.metadata``),
not in the prompt text, so prompts can be swapped freely. A replayed answer is the recorded raw text
where the study kept one (``full_answer`` for RAG, the judges' raw answers), else the
recorded ``T``/``F``; the recorded response time is reported and can be slept.
"""

from __future__ import annotations

import asyncio
import os
import time
from functools import cache
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from kgcheck.data.recordings import Recording, ReplayMissing, lookup
from kgcheck.data.upstream import DATA_ENV, DataError, resolve_data_dir
from kgcheck.providers import metadata
from kgcheck.providers.provider import Provider
from kgcheck.providers.settings import ModelSettings

# (data dir, model, dataset, method, step) tables already loaded: served without a thread.
_LOADED_TABLES: set[tuple[str, ...]] = set()


@cache
def _resolved_dir(data_dir: str, env_value: str | None) -> str:
    # Depends on $KGCHECK_DATA too, so that changing it picks another folder.
    return str(resolve_data_dir(data_dir or None))


# The run metadata replay needs, named as a user knows them (the keys are internal).
USER_TERMS = {metadata.DATASET: "the fact's dataset", metadata.FACT_ID: "the fact's id",
              metadata.RECORDED_METHOD: "a strategy the study ran"}

class ReplayChatModel(BaseChatModel):
    """Answer each call with the recorded answer of ``model_name`` for the fact asked."""

    model_name: str
    data_dir: str = Field(default="", description="Upstream-layout data; empty = default.")
    latency_scale: float = Field(default=0.0, description="Sleep this x the recorded time.")

    @property
    def _llm_type(self) -> str:
        return "replay"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def _query(self, run_manager: Any) -> tuple[str, str, str, str, str, str]:
        meta = getattr(run_manager, "metadata", None) or {}
        if meta.get(metadata.METHOD) and not meta.get(metadata.RECORDED_METHOD):
            raise ReplayMissing(
                f"replay:{self.model_name} has no recorded answers for the "
                f"{meta[metadata.METHOD]} strategy: the study recorded DKA, GIV-Z, GIV-F and "
                "RAG only; pick a live model (ollama:..., openai:...)"
            )
        missing = [name for key, name in USER_TERMS.items() if not meta.get(key)]
        if missing:
            raise ReplayMissing(
                f"replay:{self.model_name} answers only the FactCheck study's own facts, with "
                "the answers recorded for them: give the fact's dataset and id (e.g. YAGO, 5) "
                "and use a strategy the study ran, or pick a live model (ollama:..., "
                f"openai:...); this call lacks {' and '.join(missing)}"
            )
        data_dir = _resolved_dir(self.data_dir, os.environ.get(DATA_ENV))
        return (data_dir, self.model_name, str(meta[metadata.DATASET]),
                str(meta[metadata.RECORDED_METHOD]), str(meta[metadata.FACT_ID]),
                str(meta.get(metadata.STEP) or "verdict"))

    @staticmethod
    def _answer(query: tuple[str, str, str, str, str, str]) -> Recording:
        try:
            found = lookup(*query)
        except ReplayMissing as exc:
            # Said in Studio too, where a user types any fact: what replay can and cannot do.
            raise ReplayMissing(f"{exc}: replay only knows the facts of the FactCheck study "
                                "(the datasets' own ids, e.g. YAGO 5); for another fact set "
                                "the model to a live one (ollama:gemma2:9b, "
                                "openai:gpt-4o-mini, ...)") from None
        except DataError as exc:
            raise ReplayMissing(str(exc)) from None
        # Everything but the fact id names a table that is now in memory.
        _LOADED_TABLES.add(query[:4] + query[5:])
        return found

    def _recording(self, run_manager: Any) -> Recording:
        return self._answer(self._query(run_manager))

    def _result(self, rec: Recording) -> ChatResult:
        message = AIMessage(
            content=str(rec["text"]),
            response_metadata={"model_name": self.model_name, "recorded_seconds": rec["seconds"]},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        rec = self._recording(run_manager)
        if self.latency_scale and rec["seconds"]:
            time.sleep(rec["seconds"] * self.latency_scale)
        return self._result(rec)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        query = self._query(run_manager)
        if query[:4] + query[5:] in _LOADED_TABLES:
            rec = self._answer(query)
        else:
            # Loading a recording file is blocking I/O: keep it off the event loop.
            rec = await asyncio.to_thread(self._answer, query)
        if self.latency_scale and rec["seconds"]:
            await asyncio.sleep(rec["seconds"] * self.latency_scale)
        return self._result(rec)


def build(name: str, settings: ModelSettings) -> BaseChatModel:
    """Build ``replay:<name>``: the study's recorded answers of model ``name``."""
    return ReplayChatModel(model_name=name, data_dir=settings.data_dir,
                           latency_scale=settings.replay_latency)


# Reused like the others: a fresh instance would be re-serialized for the callbacks on its
# first call, which costs more than the replayed answer itself.
PROVIDER = Provider(build, env=(DATA_ENV,))
