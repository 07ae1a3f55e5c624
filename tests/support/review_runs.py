"""A run folder to review, as `kgcheck run` writes one, with hostile text in it.

The facts come from a triples file of the run's own (the run's ``source``); one triple and
one evidence chunk carry markup that must show as text, one verdict is a consensus tie.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support.served import Served

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
VERDICT_BY_FACT = {"1": "T", "2": "F", "3": "NA", "4": "T", "5": "NA", "6": "F"}


def _verdict(fact_id: str, run_id: str) -> dict:
    label = VERDICT_BY_FACT[fact_id]
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
        for fact_id in VERDICT_BY_FACT:
            fh.write(json.dumps(_verdict(fact_id, run_id)) + "\n")
    return folder


STARTUP_SECONDS = 60


def start_review(run_dir: Path, *args: str) -> Served:
    """Start `kgcheck review RUN --port 0 ...` and wait for the address it prints."""
    kgcheck = Path(sys.executable).parent / "kgcheck"
    proc = subprocess.Popen([str(kgcheck), "review", str(run_dir), "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    output: list[str] = []
    deadline = time.monotonic() + STARTUP_SECONDS
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        found = re.search(r"open (http://\S+)", line)
        if found:
            url = found.group(1)
            threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True).start()
            return Served(url, url.split("token=", 1)[1], proc, output)
    proc.kill()
    raise AssertionError("kgcheck review printed no address:\n" + "".join(output))


def checkpoint_reviews(run_dir: Path, run_id: str = "run0001") -> dict[str, str | None]:
    """Read the review graph's checkpoints: each fact's decided label (None: paused)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from kgcheck.graphs.registry import get_graph

    found: dict[str, str | None] = {}
    with sqlite3.connect(run_dir / "review.sqlite") as conn:
        graph = get_graph("review").compile(checkpointer=SqliteSaver(conn))
        for fact_id in VERDICT_BY_FACT:
            state = graph.get_state({"configurable": {"thread_id": f"{run_id}:{fact_id}"}})
            if not state.values:
                continue
            review = (state.values.get("verdict") or {}).get("review")
            found[fact_id] = None if state.interrupts else review["label"]
    return found


def label_rows(run_dir: Path) -> list[dict[str, str]]:
    """Read RUN/labels.csv as rows of dicts."""
    with (run_dir / "labels.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))
