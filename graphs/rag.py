"""RAG: check a fact against retrieved evidence, in the study's four phases.

to_sentence (the triple as one sentence) -> generate_questions -> rank_questions (keep
those similar to the sentence) -> search (the sentence and each kept question, over the
fact's stored results) -> drop_own_source (the KG's own source domains) ->
select_documents (top k_d) -> retrieve_chunks (top chunks by similarity, with cutoff and
sentence windows) -> verify (the model answers JSON yes/no) -> decide. A fact with no
evidence ends in no_evidence: NA with the reason, or a DKA answer when so configured.

Model steps degrade gracefully: a model with no answer for the sentence or the questions
(e.g. replay, which recorded neither for every dataset) falls back to a rule-based
sentence and template questions, and the verdict says so.
"""

from __future__ import annotations

import asyncio
import operator
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired

import numpy as np
from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from graphs.calls import CallRecord
from graphs.common import (
    answered_verdict,
    ask,
    defect_verdict,
    error_verdict,
    model_for,
    prompt_values,
)
from graphs.context import LLM_HINT, Context, context_of
from graphs.parsing import parse_verdict
from graphs.rag_parsing import parse_rag_answer
from graphs.registry import register
from graphs.state import Fact, FactInput, Verdict, VerdictDict, fact_from_input
from prompts import load_prompt, render
from retrievers.evidence import get_retriever, in_domains, own_source_domains
from retrievers.questions import template_questions as templates
from retrievers.search import SearchHit, merge_hits
from retrievers.selection import get_selector
from retrievers.store import open_source

METHOD = "RAG"
SEARCH_API_KEY_ENV = "KGCHECK_SEARCH_API_KEY"
VERIFY_FIELDS = {"context", "subject", "predicate", "object"}


@dataclass(kw_only=True)
class RAGContext(Context):
    """Settings of a RAG run: models per step, retrieval parameters, where evidence lives."""

    prompt: str = field(
        default="rag_verify.txt",
        metadata={"description": "Verification prompt in prompts/ or a path; needs {context}, "
                  "{subject}, {predicate}, {object}; may use {sentence}, {fact}, {kg_note}."},
    )
    sentence_prompt: str = field(
        default="rag_sentence.txt",
        metadata={"description": "Prompt that turns the triple into one sentence."},
    )
    questions_prompt: str = field(
        default="rag_questions.txt",
        metadata={"description": "Prompt that writes questions about the sentence; needs "
                  "{sentence}; may use {max_questions}."},
    )
    dka_prompt: str = field(
        default="dka.txt",
        metadata={"description": "Prompt of the DKA fallback (see no_evidence)."},
    )
    sentence_model: Annotated[str, LLM_HINT] = field(
        default="",
        metadata={"description": "Model of the triple-to-sentence step; empty = model."},
    )
    questions_model: Annotated[str, LLM_HINT] = field(
        default="",
        metadata={"description": "Model of the question step; empty = model."},
    )
    max_questions: int = field(
        default=10, metadata={"description": "Most questions the model may write (study: 10)."})
    question_threshold: float = field(
        default=0.5,
        metadata={"description": "Keep questions at least this similar to the sentence (0.5)."})
    question_top: int = field(
        default=3, metadata={"description": "Questions kept after ranking (study: 3)."})
    corpus: str = field(
        default="",
        metadata={"description": "Evidence: a folder or .tar.gz in the rag_dataset layout, a "
                  ".sqlite store, or a search API URL; empty = $KGCHECK_CORPUS, else the "
                  "imported store (.kgcheck/corpus.sqlite), else the sample corpus."},
    )
    search_api_key: str = field(
        default="",
        metadata={"description": "Key of the search API (X-API-Key); empty = "
                  "$KGCHECK_SEARCH_API_KEY."},
    )
    search_k: int = field(
        default=100, metadata={"description": "Results per search query (study: 100)."})
    exclude_domains: str = field(
        default="auto",
        metadata={"description": "Drop documents from these domains: auto = the KG's own "
                  "source (wikipedia.org for DBpedia and FactBench), none, or a comma list."},
    )
    k_d: int = field(
        default=10, metadata={"description": "Documents kept after selection (study: 10)."})
    reranker: str = field(
        default="fusion",
        metadata={"description": "Document selector: fusion (BM25 + dense, offline) or "
                  "cross-encoder:<model or path> (sentence-transformers)."},
    )
    top_k: int = field(
        default=6, metadata={"description": "Chunks given to the model (study: 6)."})
    cutoff: float = field(
        default=0.3,
        metadata={"description": "Least cosine similarity of a chunk to the sentence (0.3)."})
    window: int = field(
        default=3,
        metadata={"description": "Sentences on each side that replace a chunk (study: 3)."})
    retrieval: str = field(
        default="hybrid",
        metadata={"description": "hybrid: embed only the sentences BM25 preselects and add a "
                  "lexical bonus; dense: embed every sentence, rank by similarity (study)."},
    )
    candidates: int = field(
        default=24, metadata={"description": "Hybrid: sentences preselected by BM25."})
    lexical_weight: float = field(
        default=0.3,
        metadata={"description": "Hybrid: weight of the normalised BM25 score in the ranking."})
    embedding: str = field(
        default="minilm",
        metadata={"description": "Embedder: minilm (offline all-MiniLM-L6-v2), "
                  "ollama:<model>, openai:<model>, hf:<model> (e.g. BAAI/bge-small-en-v1.5)."},
    )
    index: str = field(
        default="chroma",
        metadata={"description": "Where chunk vectors are kept: chroma or memory."},
    )
    chroma_path: str = field(
        default="",
        metadata={"description": "Chroma folder; empty = .kgcheck/chroma ($KGCHECK_HOME)."},
    )
    chroma_url: str = field(
        default="", metadata={"description": "Chroma server URL; overrides chroma_path."})
    no_evidence: str = field(
        default="na",
        metadata={"description": "When no evidence is found: na (NA with the reason) or dka "
                  "(ask the model directly, as DKA)."},
    )


class RAGState(TypedDict):
    """A fact in, its verdict out; each phase's findings in between."""

    fact: FactInput
    sentence: NotRequired[str]
    sentence_source: NotRequired[str]
    questions: NotRequired[list[str]]
    questions_source: NotRequired[str]
    ranked_questions: NotRequired[list[dict[str, Any]]]
    hits: NotRequired[list[dict[str, Any]]]
    dropped: NotRequired[list[dict[str, Any]]]
    documents: NotRequired[list[dict[str, Any]]]
    chunks: NotRequired[list[dict[str, Any]]]
    reason: NotRequired[str]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    calls: NotRequired[Annotated[list[CallRecord], operator.add]]
    step_calls: NotRequired[Annotated[list[dict[str, Any]], operator.add]]
    verdict: NotRequired[VerdictDict]


def _retriever(ctx: RAGContext, fact: Fact) -> Any:
    return get_retriever(
        ctx.corpus, api_key=ctx.search_api_key or os.environ.get(SEARCH_API_KEY_ENV, ""),
        dataset=fact.dataset, embedding=ctx.embedding, index=ctx.index,
        chroma_path=ctx.chroma_path, chroma_url=ctx.chroma_url,
    )


def rule_sentence(fact: Fact) -> str:
    """Render the triple as ``subject predicate object.`` without a model."""
    subject, predicate, obj = fact.readable_terms()
    return f"{subject} {predicate} {obj}.".replace("..", ".")


def template_questions(fact: Fact, sentence: str) -> list[str]:
    """Write questions about the fact from templates (when no model writes them)."""
    subject, _, obj = fact.readable_terms()
    return templates(subject, obj, sentence)


_NUMBERING = re.compile(r"^\s*(?:[-*•]+|\(?\d+[.):]|q\d+[.:)]?|question\s*\d*[.:)])\s*",
                        re.IGNORECASE)


def parse_questions(text: str, limit: int) -> list[str]:
    """Read questions from a model's answer: one per line, numbering and bullets removed."""
    found: list[str] = []
    for line in text.splitlines():
        question = _NUMBERING.sub("", line).strip().strip('"').strip()
        if len(question) >= 8 and question.lower() not in {q.lower() for q in found}:
            found.append(question)
    return found[:limit]


def _step_call(step: str, reply: Any) -> dict[str, Any]:
    return {"step": step, "text": reply.text, "seconds": reply.seconds,
            "tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out}


def _fallback_note(step: str, exc: Exception) -> dict[str, Any]:
    return {"step": step, "fallback": True, "error": f"{type(exc).__name__}: {exc}"}


async def to_sentence(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """Turn the triple into one sentence with the model; rule-based when it has no answer."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    if fact.defect:
        return {"verdict": defect_verdict(fact, METHOD, ctx.model)}
    template = await asyncio.to_thread(load_prompt, ctx.sentence_prompt,
                                       {"subject", "predicate", "object"})
    values = await asyncio.to_thread(prompt_values, fact)
    try:
        reply = await ask(model_for(ctx, ctx.sentence_model or None),
                          [HumanMessage(render(template, **values))], fact, METHOD, "sentence")
    except Exception as exc:  # noqa: BLE001 - the step has a rule-based fallback
        return {"sentence": rule_sentence(fact), "sentence_source": "rule",
                "step_calls": [_fallback_note("sentence", exc)]}
    sentence = " ".join(reply.text.strip().strip('"').split())
    if not sentence:
        return {"sentence": rule_sentence(fact), "sentence_source": "rule",
                "step_calls": [_step_call("sentence", reply)]}
    return {"sentence": sentence, "sentence_source": "model",
            "step_calls": [_step_call("sentence", reply)]}


def after_sentence(state: RAGState) -> Literal["generate_questions", "__end__"]:
    """End at once for a fact that cannot be sent."""
    # The literal, not END (typed plain str), so the return matches the Literal annotation.
    return "__end__" if "verdict" in state else "generate_questions"


async def generate_questions(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """Ask the model for questions about the sentence; templates when it has none."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    sentence = state["sentence"]
    template = await asyncio.to_thread(load_prompt, ctx.questions_prompt, {"sentence"})
    values = {**await asyncio.to_thread(prompt_values, fact), "sentence": sentence,
              "max_questions": ctx.max_questions}
    try:
        reply = await ask(model_for(ctx, ctx.questions_model or None),
                          [HumanMessage(render(template, **values))], fact, METHOD, "questions")
    except Exception as exc:  # noqa: BLE001 - the step has a template fallback
        return {"questions": template_questions(fact, sentence)[:ctx.max_questions],
                "questions_source": "template", "step_calls": [_fallback_note("questions", exc)]}
    questions = parse_questions(reply.text, ctx.max_questions)
    if not questions:
        questions = template_questions(fact, sentence)[:ctx.max_questions]
        return {"questions": questions, "questions_source": "template",
                "step_calls": [_step_call("questions", reply)]}
    return {"questions": questions, "questions_source": "model",
            "step_calls": [_step_call("questions", reply)]}


def _rank(ctx: RAGContext, fact: Fact, sentence: str, questions: list[str]) -> list[dict]:
    if not questions:
        return []
    retriever = _retriever(ctx, fact)
    vectors = retriever.embedder.embed([sentence, *questions])
    scores = vectors[1:] @ vectors[0]
    order = np.lexsort((np.arange(len(questions)), -scores))
    kept = [int(i) for i in order if scores[i] >= ctx.question_threshold][:ctx.question_top]
    return [{"text": questions[i], "score": round(float(scores[i]), 4), "kept": int(i) in kept}
            for i in order]


async def rank_questions(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """Score each question by similarity to the sentence; keep the best above the threshold."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    ranked = await asyncio.to_thread(_rank, ctx, fact, state["sentence"],
                                     state.get("questions", []))
    return {"ranked_questions": ranked}


def _search(ctx: RAGContext, fact: Fact, queries: list[str]) -> tuple[list[dict], str]:
    retriever = _retriever(ctx, fact)
    results = retriever.search_many(queries, fact.dataset, fact.id, ctx.search_k)
    return [h.as_dict() for h in merge_hits(results)], retriever.source.location


async def search(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """Search the fact's stored results for the sentence and each kept question."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    queries = [state["sentence"]] + [q["text"] for q in state.get("ranked_questions", [])
                                     if q["kept"]]
    hits, location = await asyncio.to_thread(_search, ctx, fact, queries)
    out: dict[str, Any] = {"hits": hits}
    if not hits:
        out["reason"] = (f"the corpus {location} has no documents for "
                         f"{fact.dataset or 'this'} fact {fact.id!r}")
    return out


async def drop_own_source(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """Drop documents that come from the KG's own source (e.g. Wikipedia for DBpedia)."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    domains = own_source_domains(fact.dataset, ctx.exclude_domains)
    hits = state.get("hits", [])
    kept = [h for h in hits if not _excluded(h["domain"], domains)]
    dropped = [h for h in hits if _excluded(h["domain"], domains)]
    out: dict[str, Any] = {"hits": kept, "dropped": dropped}
    if hits and not kept:
        out["reason"] = (f"all {len(hits)} documents come from excluded domains "
                         f"({', '.join(domains)})")
    return out


def _excluded(domain: str, domains: tuple[str, ...]) -> bool:
    return in_domains(domain, domains)


def _select(ctx: RAGContext, fact: Fact, sentence: str, hits: list[dict]) -> list[dict]:
    if not hits:
        return []
    retriever = _retriever(ctx, fact)
    documents = retriever.documents(fact.dataset, fact.id)
    objects = [SearchHit(**h) for h in hits if h["doc_id"] in documents]
    chosen = get_selector(ctx.reranker).select(sentence, objects, documents, ctx.k_d)
    return [h.as_dict() for h in chosen]


async def select_documents(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """Keep the k_d documents most relevant to the sentence."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    chosen = await asyncio.to_thread(_select, ctx, fact, state["sentence"], state.get("hits", []))
    return {"documents": chosen}


def _chunks(ctx: RAGContext, fact: Fact, sentence: str, doc_ids: list[str]) -> list[dict]:
    if not doc_ids:
        return []
    retriever = _retriever(ctx, fact)
    found = retriever.chunks(sentence, fact.dataset, fact.id, doc_ids, top_k=ctx.top_k,
                             cutoff=ctx.cutoff, window=ctx.window, candidates=ctx.candidates,
                             mode=ctx.retrieval, lexical_weight=ctx.lexical_weight)
    seen: set[str] = set()
    unique = []
    for chunk in found:
        # Neighbouring sentences share a window; the model needs each text once.
        if chunk.text not in seen:
            seen.add(chunk.text)
            unique.append(chunk.as_dict())
    return unique


async def retrieve_chunks(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """Retrieve the chunks most similar to the sentence, replaced by their windows."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    doc_ids = [d["doc_id"] for d in state.get("documents", [])]
    chunks = await asyncio.to_thread(_chunks, ctx, fact, state["sentence"], doc_ids)
    out: dict[str, Any] = {"chunks": chunks}
    if doc_ids and not chunks:
        out["reason"] = (f"no chunk of {len(doc_ids)} documents reached similarity "
                         f"{ctx.cutoff} to the sentence")
    return out


def after_retrieval(state: RAGState) -> Literal["verify", "no_evidence"]:
    """Verify with the evidence, or report that there is none."""
    return "verify" if state.get("chunks") else "no_evidence"


def context_text(chunks: list[dict[str, Any]]) -> str:
    """Lay out the evidence for the prompt: each window under its document id."""
    return "\n\n".join(f"[document {c['doc_id']}]\n{c['text']}" for c in chunks)


async def verify(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """Ask the model whether the evidence supports the fact (JSON yes/no)."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    template = await asyncio.to_thread(load_prompt, ctx.prompt, VERIFY_FIELDS)
    values = {**await asyncio.to_thread(prompt_values, fact), "sentence": state["sentence"],
              "context": context_text(state["chunks"])}
    messages = [HumanMessage(render(template, **values))]
    try:
        reply = await ask(model_for(ctx), messages, fact, METHOD, "verdict")
    except Exception as exc:  # noqa: BLE001 - any model failure is recorded, not raised
        return {"verdict": _failed(fact, ctx, exc, _details(state, ctx))}
    return {"messages": [*messages, reply.message], "calls": [reply.record()]}


def after_verify(state: RAGState) -> Literal["decide", "__end__"]:
    """End when the call failed; otherwise read the answer."""
    return "__end__" if "verdict" in state else "decide"


def _failed(fact: Fact, ctx: RAGContext, exc: Exception,
            details: dict[str, Any]) -> VerdictDict:
    """Build the NA verdict of a failed model call, keeping what retrieval found."""
    verdict = error_verdict(fact, METHOD, ctx.model, exc)
    verdict["details"] = {**details, **verdict.get("details", {})}
    return verdict


def _details(state: RAGState, ctx: RAGContext) -> dict[str, Any]:
    """Collect how the verdict was reached, the evidence above all."""
    return {
        "sentence": state.get("sentence"),
        "sentence_source": state.get("sentence_source"),
        "questions": [q for q in state.get("ranked_questions", []) if q["kept"]],
        "questions_source": state.get("questions_source"),
        "documents": [{"doc_id": d["doc_id"], "url": d["url"], "score": round(d["score"], 5)}
                      for d in state.get("documents", [])],
        "dropped": [d["doc_id"] for d in state.get("dropped", [])],
        "evidence": [{"doc_id": c["doc_id"], "chunk_id": c["chunk_id"],
                      "similarity": c["similarity"], "text": c["text"]}
                     for c in state.get("chunks", [])],
        "step_calls": state.get("step_calls", []),
        "retrieval": {"mode": ctx.retrieval, "embedding": ctx.embedding, "k_d": ctx.k_d,
                      "top_k": ctx.top_k, "cutoff": ctx.cutoff, "window": ctx.window,
                      "reranker": ctx.reranker},
    }


async def decide(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """Parse the answer: yes -> T, no -> F, unreadable -> NA."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    calls = state["calls"]
    label = parse_rag_answer(calls[-1]["text"])
    details = _details(state, ctx)
    if label == "NA":
        details["reason"] = "the answer holds no readable yes/no output"
    return {"verdict": answered_verdict(fact, METHOD, ctx.model, label, calls, **details)}


async def no_evidence(state: RAGState, runtime: Runtime[RAGContext]) -> dict[str, Any]:
    """No evidence: NA with the reason, or (no_evidence=dka) the model's direct answer."""
    ctx = context_of(runtime, RAGContext)
    fact = fact_from_input(state["fact"])
    reason = "no evidence: " + state.get("reason", "nothing was retrieved")
    details = {**_details(state, ctx), "reason": reason}
    if ctx.no_evidence.strip().lower() != "dka":
        verdict = Verdict(fact_id=fact.id, label="NA", method=METHOD, model=ctx.model,
                          details=details)
        return {"verdict": verdict.model_dump()}
    template = await asyncio.to_thread(load_prompt, ctx.dka_prompt,
                                       {"subject", "predicate", "object"})
    values = await asyncio.to_thread(prompt_values, fact)
    try:
        reply = await ask(model_for(ctx), [HumanMessage(render(template, **values))], fact, "DKA")
    except Exception as exc:  # noqa: BLE001 - any model failure is recorded, not raised
        return {"verdict": _failed(fact, ctx, exc, {**details, "fallback": "DKA"})}
    label = parse_verdict(reply.text)
    return {"verdict": answered_verdict(fact, METHOD, ctx.model, label, [reply.record()],
                                        **details, fallback="DKA")}


builder = StateGraph(RAGState, context_schema=RAGContext)
builder.add_node("to_sentence", to_sentence)
builder.add_node("generate_questions", generate_questions)
builder.add_node("rank_questions", rank_questions)
builder.add_node("search", search)
builder.add_node("drop_own_source", drop_own_source)
builder.add_node("select_documents", select_documents)
builder.add_node("retrieve_chunks", retrieve_chunks)
builder.add_node("verify", verify)
builder.add_node("decide", decide)
builder.add_node("no_evidence", no_evidence)
builder.add_edge(START, "to_sentence")
builder.add_conditional_edges("to_sentence", after_sentence)
builder.add_edge("generate_questions", "rank_questions")
builder.add_edge("rank_questions", "search")
builder.add_edge("search", "drop_own_source")
builder.add_edge("drop_own_source", "select_documents")
builder.add_edge("select_documents", "retrieve_chunks")
builder.add_conditional_edges("retrieve_chunks", after_retrieval)
builder.add_conditional_edges("verify", after_verify)
builder.add_edge("decide", END)
builder.add_edge("no_evidence", END)

graph = builder.compile(name="rag")

def evidence_coverage(facts: Sequence[Fact], ctx: RAGContext) -> list[str]:
    """Warn, before a batch run, about facts the evidence corpus holds no documents for."""
    source = open_source(ctx.corpus,
                         api_key=ctx.search_api_key or os.environ.get(SEARCH_API_KEY_ENV, ""))
    missing: dict[str, int] = {}
    for dataset in sorted({f.dataset for f in facts}):
        covered = set(source.fact_ids(dataset))
        missing[dataset] = sum(1 for f in facts if f.dataset == dataset and f.id not in covered)
    lacking = sum(missing.values())
    if not lacking:
        return []
    example = next(iter(d for d, n in missing.items() if n)).lower()
    return [
        f"the evidence corpus {source.location} has no documents for {lacking} of "
        f"{len(facts)} facts; they will be NA (no evidence). Import the evidence first: "
        f"kgcheck corpus import --dataset {example} --from PATH (a folder or .tar.gz in the "
        "rag_dataset layout), or pass --set corpus=PATH"
    ]


register(
    "rag", builder, RAGContext, method=METHOD,
    description="Retrieval-augmented check: sentence, questions, search, select, chunks, verify.",
    preflight=evidence_coverage,
)
