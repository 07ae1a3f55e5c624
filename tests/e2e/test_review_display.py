"""The review page shows evidence once per passage, blank nodes and literals readably, and
the judge that decided a consensus tie."""

from __future__ import annotations

import json
from pathlib import Path

from kgcheck.data.rdf import RdfReader
from kgcheck.graphs.review import question_for
from tests.e2e.test_review_browser import _open, _text, _wait, browser  # noqa: F401 - fixture
from tests.support.review_runs import start_review
from tests.support.served import stop_served

SENTENCES = [f"Sentence {n} about Ada." for n in range(12)]


def _window(index: int, size: int = 3) -> str:
    return " ".join(SENTENCES[max(0, index - size):index + size + 1])


def _chunks(*indexes: int, doc: str = "d1") -> list[dict]:
    return [{"doc_id": doc, "chunk_id": f"{doc}#{i}", "similarity": round(0.5 + i / 100, 2),
             "text": _window(i)} for i in indexes]


def _question(details: dict, fact: dict | None = None, rdf: dict | None = None) -> dict:
    fact = fact or {"id": "f1", "dataset": "kg", "subject": "Ada", "predicate": "p",
                    "object": "x"}
    verdict = {"label": "T", "details": details, **({"rdf": rdf} if rdf else {})}
    return question_for(fact, verdict)  # type: ignore[arg-type]


def test_overlapping_windows_of_one_document_are_merged() -> None:
    # Sentences 2, 4, 5 and 7 with three on each side: one stretch, sentences 0 to 10.
    details = {"evidence": _chunks(4, 2, 7, 5) + _chunks(1, doc="d2"),
               "documents": [{"doc_id": "d1", "url": "https://e.org/ada"}],
               "retrieval": {"window": 3}}
    evidence = _question(details)["evidence"]
    assert [e["doc_id"] for e in evidence] == ["d1", "d2"]
    assert evidence[0]["text"] == " ".join(SENTENCES[0:11])
    assert evidence[0]["passages"] == 4 and evidence[0]["similarity"] == 0.57
    assert evidence[0]["source"] == "https://e.org/ada"
    assert evidence[1]["text"] == _window(1) and evidence[1]["passages"] == 1


def test_windows_far_apart_stay_apart_and_touching_ones_join() -> None:
    far = _question({"evidence": _chunks(0, 11), "retrieval": {"window": 3}})["evidence"]
    assert len(far) == 2
    touching = _question({"evidence": _chunks(3, 10), "retrieval": {"window": 3}})["evidence"]
    assert [e["text"] for e in touching] == [" ".join(SENTENCES[0:12])]


def test_blank_nodes_and_typed_literals_are_shown_as_such(tmp_path: Path) -> None:
    kg = tmp_path / "kg.ttl"
    kg.write_text('@prefix ex: <http://e.org/> .\n'
                  '_:rec454 ex:age "36"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
                  'ex:ada ex:motto "Imagination"@en .\n')
    facts = {f.predicate.rsplit("/", 1)[1]: f for f in RdfReader(kg)}
    age = _question({}, dict(facts["age"].as_input()), facts["age"].rdf)["fact"]
    assert age["readable"]["subject"] == "a blank node (_:rec454)"
    assert age["readable"]["object"] == "36 (xsd:integer)"
    assert age["terms"]["object"] == '"36"^^<http://www.w3.org/2001/XMLSchema#integer>'
    motto = _question({}, dict(facts["motto"].as_input()), facts["motto"].rdf)["fact"]
    assert motto["readable"]["object"] == "Imagination (@en)"


def test_the_judge_of_a_tie_is_named() -> None:
    details = {"votes": [{"model": "ollama:a", "label": "T", "raw": "T"},
                         {"model": "ollama:b", "label": "F", "raw": "F"}],
               "decision": "tie", "judge": "ollama:big", "judge_called": True,
               "judge_decided": True, "judge_label": "T", "judge_raw": "T"}
    judge = _question(details)["judge"]
    assert judge == {"model": "ollama:big", "label": "T", "decided": True, "raw": "T",
                     "error": None}
    assert _question({"votes": details["votes"], "decision": "tie"})["judge"] is None


def test_the_page_shows_merged_evidence_terms_and_the_judge(browser, tmp_path: Path  # noqa: F811
                                                            ) -> None:
    kg = tmp_path / "kg.ttl"
    kg.write_text('@prefix ex: <http://e.org/> .\n'
                  '_:rec454 ex:age "36"^^<http://www.w3.org/2001/XMLSchema#integer> .\n')
    [fact] = list(RdfReader(kg))
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({
        "dataset": "kg", "strategy": "dka", "method": "DKA", "models": ["ollama:a"],
        "judge": "ollama:big", "source": str(kg.resolve()), "run_id": "r1", "settings": {}}))
    details = {"evidence": _chunks(4, 2, 5, 7), "retrieval": {"window": 3},
               "votes": [{"model": "ollama:a", "label": "T", "raw": "T"},
                         {"model": "ollama:b", "label": "F", "raw": "F"}],
               "decision": "tie", "judge": "ollama:big", "judge_called": True,
               "judge_decided": True, "judge_label": "F", "judge_raw": "F"}
    record = {"fact_id": fact.id, "label": "F", "method": "DKA", "model": "ollama:a,ollama:b",
              "raw": "F", "error": None, "details": details, "dataset": "kg", "run_id": "r1",
              "subject": fact.subject, "predicate": fact.predicate, "object": fact.object,
              "rdf": fact.rdf}
    (run / "verdicts.jsonl").write_text(json.dumps(record) + "\n")
    served = start_review(run)
    try:
        _open(browser, served.url)
        _wait(browser, lambda d: _text(d, "#judge"), "no judge line")
        assert _text(browser, "#judge") == "Judge: F ollama:big decided the tie"
        items = browser.execute_script(
            "return [...document.querySelectorAll('#evidence li')].map(e => e.textContent)")
        assert len(items) == 1 and "4 overlapping passages merged" in items[0]
        assert items[0].count("Sentence 4 about Ada.") == 1
        triple = _text(browser, "dl.triple") or ""
        assert "a blank node (_:rec454)" in triple and "36 (xsd:integer)" in triple
        assert '"36"^^<http://www.w3.org/2001/XMLSchema#integer>' in triple
    finally:
        stop_served(served)
