"""A run folder to review, as `kgcheck run` writes one, with hostile text in it.

The facts come from a triples file of the run's own (the run's ``source``); one triple and
one evidence chunk carry markup that must show as text, one verdict is a consensus tie.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

SCRIPT = "<script>window.__xss = 'script'</script>"
IMG = "<img src=x onerror=\"window.__xss = 'img'\">"

FACTS = [
    ("1", "Alan_Alda", "isMarriedTo", "Arlene_Alda", "T"),
    ("2", "Paris", "isCapitalOf", "Germany", "F"),
    ("3", f"Evil{SCRIPT}", "hasName", IMG, "F"),
    ("4", "Berlin", "isLocatedIn", "Germany", "T"),
    ("5", "Marie_Curie", "hasWonPrize", "Nobel_Prize_in_Physics", "T"),
    ("6", "Rome", "isCapitalOf", "Spain", "F"),
]
# The model's label per fact: facts 2 and 6 F, 3 NA, 5 a consensus tie (NA).
LABELS = {"1": "T", "2": "F", "3": "NA", "4": "T", "5": "NA", "6": "F"}


def _verdict(fact_id: str, run_id: str) -> dict:
    label = LABELS[fact_id]
    details: dict = {}
    if fact_id == "3":
        details = {"documents": [{"doc_id": "d1", "url": "https://example.org/evil",
                                  "score": 1.0}],
                   "evidence": [{"doc_id": "d1", "chunk_id": 0, "similarity": 0.91,
                                 "text": f"Evidence {IMG} and {SCRIPT} here."}]}
    if fact_id == "1":
        details = {"documents": [{"doc_id": "w7", "url": "https://example.org/alda",
                                  "score": 0.8}],
                   "evidence": [{"doc_id": "w7", "chunk_id": 2, "similarity": 0.77,
                                 "text": "Alan Alda has been married to Arlene Alda since 1957."}]}
    if fact_id == "5":
        details = {"votes": [{"model": "ollama:a", "label": "T", "raw": "T"},
                             {"model": "ollama:b", "label": "F", "raw": "F"}],
                   "decision": "tie", "counts": {"T": 1, "F": 1, "NA": 0}}
    fact = next(f for f in FACTS if f[0] == fact_id)
    return {"fact_id": fact_id, "label": label, "method": "DKA", "model": "ollama:gemma2:9b",
            "raw": f"{label} because {fact[3]}", "raws": [label], "attempts": 1,
            "seconds": 0.1, "tokens_in": None, "tokens_out": None, "error": None,
            "details": details, "dataset": "mine", "gold": fact[4], "run_id": run_id}


def make_run(folder: Path, run_id: str = "run0001") -> Path:
    """Write a run folder of the six facts above; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    triples = folder.parent / f"{folder.name}-facts.csv"
    with triples.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "subject", "predicate", "object", "label"])
        for row in FACTS:
            writer.writerow(row)
    (folder / "run.json").write_text(json.dumps({
        "dataset": "mine", "strategy": "dka", "method": "DKA", "models": ["ollama:gemma2:9b"],
        "judge": None, "source": str(triples.resolve()), "run_id": run_id, "settings": {}}))
    with (folder / "verdicts.jsonl").open("w", encoding="utf-8") as fh:
        for fact_id in LABELS:
            fh.write(json.dumps(_verdict(fact_id, run_id)) + "\n")
    return folder
