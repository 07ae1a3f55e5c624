"""The ``replay`` provider: a chat model that answers with the study's recorded answers.

Which fact is being asked travels in the call's metadata (see ``graphs.calls``), not in the
prompt text, so prompts can be swapped freely. A replayed answer is the recorded raw text
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

from graphs.upstream import (
    DATA_ENV,
    JUDGE_MODES,
    JUDGES_PATH,
    DataError,
    as_source,
    canonical_dataset,
    dataset_path,
    iter_records,
    judge_fact_id,
    recorded_files,
    resolve_data_dir,
)

# Metadata keys a node sets on each model call (graphs.calls.call_config).
META_FACT = "kgcheck_fact_id"
META_DATASET = "kgcheck_dataset"
META_METHOD = "kgcheck_method"
META_STEP = "kgcheck_step"


# (data dir, model, dataset, method, step) tables already loaded: served without a thread.
_LOADED_TABLES: set[tuple[str, ...]] = set()


@cache
def _resolved_dir(data_dir: str, env_value: str | None) -> str:
    # Depends on $KGCHECK_DATA too, so that changing it picks another folder.
    return str(resolve_data_dir(data_dir or None))


class ReplayMissing(LookupError):
    """The recordings hold no answer for this model, method, dataset and fact."""


class Recording(dict[str, Any]):
    """One recorded answer: ``text`` (raw answer) and ``seconds`` (None when not recorded)."""


@cache
def _answers(data_dir: str, method: str, dataset: str, model: str) -> dict[str, Recording]:
    src = as_source(data_dir)
    files = [
        r for r in recorded_files(src)
        if r.method.lower() == method.lower() and r.dataset.lower() == dataset.lower()
        and r.model == model
    ]
    if not files:
        return {}
    out: dict[str, Recording] = {}
    for row in iter_records(src, files[0].relpath):
        text = row.get("full_answer") or row.get("response")
        out[str(row["id"])] = Recording(text=text, seconds=row.get("response_time"))
    return out


@cache
def _judges(data_dir: str, method: str, dataset: str, model: str) -> dict[str, Recording]:
    src = as_source(data_dir)
    mode = JUDGE_MODES.get(method.upper())
    if mode is None or not src.exists(JUDGES_PATH):
        return {}
    out: dict[str, Recording] = {}
    for row in src.read_json(JUDGES_PATH):
        if row.get("Mode") == mode and row.get("Model") == model and (
            str(row.get("Dataset", "")).lower() == dataset.lower()
        ):
            fid = judge_fact_id(dataset, str(row["Custom_id"]))
            out[fid] = Recording(text=row.get("Answer"), seconds=None)
    return out


@cache
def _sentences(data_dir: str, dataset: str) -> dict[str, str]:
    src = as_source(data_dir)
    rel = dataset_path(canonical_dataset(src, dataset), "kg_modified.json")
    return src.read_json(rel) if src.exists(rel) else {}


def lookup(data_dir: str, model: str, dataset: str, method: str, fact_id: str,
           step: str = "verdict") -> Recording:
    """Find the recorded answer of ``model`` for one fact, method and step.

    Steps: ``verdict`` (the method's answer; for a judge model, its tie-break answer) and
    ``sentence`` (RAG's triple-to-sentence step, from ``kg_modified.json``).
    """
    if step == "sentence":
        sentence = _sentences(data_dir, dataset).get(fact_id)
        if sentence is None:
            raise ReplayMissing(f"no recorded sentence for {dataset} fact {fact_id!r}")
        return Recording(text=sentence, seconds=None)
    if step != "verdict":
        raise ReplayMissing(f"the study recorded no {step!r} answers")
    for table in (_answers, _judges):
        found = table(data_dir, method, dataset, model).get(fact_id)
        if found is not None and found.get("text") is not None:
            return found
    raise ReplayMissing(
        f"replay:{model} has no recorded {method} answer for {dataset} fact {fact_id!r}"
    )


def has_recordings(data_dir: str | None, model: str, dataset: str, method: str) -> bool:
    """Tell whether the study recorded ``model``'s answers (or tie-breaks) for a method."""
    resolved = str(resolve_data_dir(data_dir))
    return bool(
        _answers(resolved, method, dataset, model) or _judges(resolved, method, dataset, model)
    )


def recorded_models(data_dir: str | None = None) -> list[str]:
    """Models with recorded answers (members and judges) in a data folder."""
    src = as_source(data_dir)
    models = {r.model for r in recorded_files(src)}
    if src.exists(JUDGES_PATH):
        models |= {str(r["Model"]) for r in src.read_json(JUDGES_PATH)}
    return sorted(models)


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
        missing = [k for k in (META_FACT, META_DATASET, META_METHOD) if not meta.get(k)]
        if missing:
            raise ReplayMissing(
                f"replay:{self.model_name} needs the fact being checked in the call's metadata "
                f"(missing {', '.join(missing)}); replay answers facts of a recorded dataset only"
            )
        data_dir = _resolved_dir(self.data_dir, os.environ.get(DATA_ENV))
        return (data_dir, self.model_name, str(meta[META_DATASET]), str(meta[META_METHOD]),
                str(meta[META_FACT]), str(meta.get(META_STEP) or "verdict"))

    @staticmethod
    def _answer(query: tuple[str, str, str, str, str, str]) -> Recording:
        try:
            found = lookup(*query)
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
