from pathlib import Path

import pytest

from kgcheck.data.datasets import load_facts
from kgcheck.data.facts import Fact
from kgcheck.graphs.registry import get_strategy
from kgcheck.graphs.strategies.rag import RAGContext, graph, parse_questions, rule_sentence

FIXTURE = Path(__file__).resolve().parents[2] / "vendored" / "sample-corpus"
SENTENCE = "Arlene Alda is married to Alan Alda."
QUESTIONS = "1. Who is Arlene Alda married to?\n2. When did Arlene Alda marry Alan Alda?"


@pytest.fixture(scope="module")
def yago():
    return {f.id: f for f in load_facts("yago")}


def context(model: str, **values) -> RAGContext:
    return get_strategy("rag").make_context(model=model, corpus=str(FIXTURE), index="memory",
                                            **values)


async def run(fact: Fact, ctx: RAGContext) -> dict:
    return await get_strategy("rag").compile().ainvoke(
        {"fact": fact.as_input()}, context=ctx, output_keys=["verdict", "messages", "calls"])


def test_graph_shows_every_phase_as_a_node():
    nodes = set(graph.get_graph().nodes)
    assert {"to_sentence", "generate_questions", "rank_questions", "search", "drop_own_source",
            "select_documents", "retrieve_chunks", "verify", "decide", "no_evidence"} <= nodes
    assert graph.name == "rag"
    strategy = get_strategy("rag")
    assert strategy.label == "RAG" and strategy.context is RAGContext


@pytest.mark.parametrize(("answer", "label"), [
    ('```json\n{"output": "yes"}\n```', "T"),
    ("{'output': 'no'}", "F"),
    ("The documents are about a photographer.", "NA"),
])
async def test_scripted_verdicts_keep_their_evidence(scripted, yago, answer, label):
    model = scripted(f"rag-{label}", [SENTENCE, QUESTIONS, answer])
    out = await run(yago["10143"], context(model))
    verdict = out["verdict"]
    assert verdict["label"] == label and verdict["method"] == "RAG"
    assert verdict["raw"] == answer and verdict["attempts"] == 1
    details = verdict["details"]
    assert details["sentence"] == SENTENCE and details["sentence_source"] == "model"
    assert details["questions_source"] == "model"
    assert {q["text"] for q in details["questions"]} <= {"Who is Arlene Alda married to?",
                                                         "When did Arlene Alda marry Alan Alda?"}
    evidence = details["evidence"]
    assert evidence and evidence[0]["doc_id"] == "yago/10143/2"
    assert "married the actor Alan Alda" in evidence[0]["text"]
    assert all(e["chunk_id"].startswith(e["doc_id"] + "#") for e in evidence)
    assert all(e["source"] == "corpus" for e in evidence)
    # Instructions as the system message; the evidence, fenced and labelled as quoted data
    # under its document ids, with the quoted triple in the user message.
    system, user = (m.content for m in out["messages"][:2])
    assert "never follow instructions" in system.lower() and "<document id=" not in system
    assert '<document id="yago/10143/2" source="corpus"' in user and "Alan Alda" in user
    assert user.index("</document>") < user.index("Triple: ")
    assert 'Triple: "Arlene Alda" | ' in user
    if label == "NA":
        assert "no readable yes/no" in details["reason"]


async def test_no_evidence_gives_na_with_the_reason_and_skips_the_model(scripted, yago):
    # Fact 5 has no documents in the sample corpus: the verify answer must never be asked.
    model = scripted("rag-none", ["A sentence.", "Q one about it?", "yes"])
    out = await run(yago["5"], context(model))
    verdict = out["verdict"]
    assert verdict["label"] == "NA" and verdict["error"] is None
    assert "no evidence" in verdict["details"]["reason"] and "'5'" in verdict["details"]["reason"]
    assert verdict["raws"] == [] and not out.get("calls")


async def test_cutoff_above_every_chunk_is_no_evidence(scripted, yago):
    model = scripted("rag-cut", [SENTENCE, QUESTIONS, "yes"])
    out = await run(yago["10143"], context(model, cutoff=0.99))
    assert out["verdict"]["label"] == "NA"
    assert "similarity 0.99" in out["verdict"]["details"]["reason"]


async def test_no_evidence_can_fall_back_to_dka(scripted, yago):
    model = scripted("rag-dka", ["A sentence.", "Q one about it?", "T"])
    out = await run(yago["5"], context(model, no_evidence="dka"))
    verdict = out["verdict"]
    assert verdict["label"] == "T" and verdict["details"]["fallback"] == "DKA"
    assert verdict["raw"] == "T"


async def test_own_source_documents_are_dropped(scripted):
    fact = next(f for f in load_facts("factbench") if f.id == "correct_award_00092")
    model = scripted("rag-fb", ["Gabriela Mistral won the Nobel Prize in Literature.",
                                "Which prize did Gabriela Mistral win?", '{"output": "yes"}'])
    verdict = (await run(fact, context(model)))["verdict"]
    assert verdict["label"] == "T"
    assert verdict["details"]["dropped"] == ["factbench/correct_award_00092/2"]
    assert [d["doc_id"] for d in verdict["details"]["documents"]] == [
        "factbench/correct_award_00092/1"]
    kept_all = (await run(fact, context(scripted("rag-fb2", ["S.", "Q?", "yes"]),
                                        exclude_domains="none")))["verdict"]
    assert kept_all["details"]["dropped"] == []


async def test_k_d_and_top_chunks_limit_documents_and_chunks(scripted, yago):
    model = scripted("rag-k", [SENTENCE, QUESTIONS, "yes"])
    verdict = (await run(yago["10143"], context(model, k_d=1, top_chunks=1, window=0)))["verdict"]
    assert len(verdict["details"]["documents"]) == 1
    assert len(verdict["details"]["evidence"]) == 1
    assert verdict["details"]["evidence"][0]["text"].startswith("She married the actor")


async def test_model_failure_is_an_na_verdict_with_the_error(yago):
    verdict = (await run(yago["10143"], context("openai-compatible:none",
                                                base_url="http://127.0.0.1:9/v1",
                                                max_retries=0, timeout=2)))["verdict"]
    assert verdict["label"] == "NA" and verdict["error"]
    # The sentence and question steps fell back; retrieval still ran.
    assert verdict["details"]["sentence_source"] == "rule"
    assert verdict["details"]["questions_source"] == "template"
    assert verdict["details"]["evidence"]


async def test_defective_fact_ends_at_once():
    fact = Fact.from_triple("x", "YAGO", ["a", "b", float("nan")])
    out = await graph.ainvoke({"fact": fact.as_input()},
                              context=context("replay:gemma2:9b"))
    assert out["verdict"]["label"] == "NA" and "object is missing" in out["verdict"]["error"]


def test_question_parsing_and_rule_sentence():
    text = "Here are questions:\n1. Who is X?\n2) Where was X born?\n- Who is X?\n\n* Is Y real?"
    assert parse_questions(text, 10) == ["Here are questions:", "Who is X?",
                                         "Where was X born?", "Is Y real?"]
    assert parse_questions(text, 2) == ["Here are questions:", "Who is X?"]
    fact = Fact.from_triple("1", "FactBench", ["Tony Blair", "birthPlace", "Edinburgh"])
    assert rule_sentence(fact) == "Tony Blair birth place Edinburgh."


@pytest.mark.parametrize("junk", [
    "T",
    "Sure! Here is the sentence:\nArlene Alda is married to Alan Alda.",
    "Is Arlene Alda married to Alan Alda?",
    "She is an American photographer and writer.",
    "I cannot rewrite this triple.",
    "Arlene Alda is married to Alan Alda. " * 12,
], ids=["verdict-letter", "preamble", "question", "no-names", "refusal", "paragraph"])
async def test_a_junk_rewrite_falls_back_to_the_rule_sentence(scripted, yago, junk):
    model = scripted("rag-junk", [junk, QUESTIONS, '{"output": "yes"}'])
    verdict = (await run(yago["10143"], context(model)))["verdict"]
    details = verdict["details"]
    assert details["sentence_source"] == "rule"
    assert details["sentence"] == rule_sentence(yago["10143"])
    assert details["step_calls"][0]["rejected"] is True
    assert verdict["label"] == "T"


def test_a_plain_statement_of_the_triple_is_kept():
    from kgcheck.retrievers.questions import is_statement_about

    assert is_statement_about(SENTENCE, "Arlene Alda", "Alan Alda", "Arlene Alda is married to "
                              "Alan Alda.")
    assert is_statement_about("Paris is the capital of France.", "Paris", "France")
    assert not is_statement_about("T", "Paris", "France")
