"""Run folders for the explorer, written as `kgcheck run` writes them, of any size.

``make_view_run`` writes ``n`` verdicts over a few predicates with gold labels, wrong
answers, NA (with and without a failure), confidences, a consensus run's votes, and one
fact whose triple, raw answer and evidence carry markup that must show as text. The
labels follow from the fact's number and the run's ``shift``, so two runs disagree on a
known set of facts and a test can count what each filter must keep.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.served import Served

SCRIPT = "<script>window.__xss = 'script'</script>"
IMG = "<img src=x onerror=\"window.__xss = 'img'\">"
PREDICATES = ("award", "birthPlace", "team", "author", "spouse")
HOSTILE_ID = "f00003"


def fact_id(i: int) -> str:
    return f"f{i:05d}"


def gold_of(i: int) -> str:
    return "T" if i % 2 == 0 else "F"


def label_of(i: int, shift: int = 0) -> str:
    """The run's verdict of fact ``i``: right mostly, wrong every 5th, NA every 7th."""
    j = i + shift
    if j % 7 == 3:
        return "NA"
    return gold_of(i) if j % 5 else ("F" if gold_of(i) == "T" else "T")


def failed(i: int, shift: int = 0) -> bool:
    """Facts whose NA comes from a failed call (the other NA are 'not enough information')."""
    return label_of(i, shift) == "NA" and (i + shift) % 2 == 0


def confidence_of(i: int) -> float:
    return round(((i * 37) % 100) / 100, 2)


def record(i: int, run_id: str, shift: int = 0, consensus: bool = False) -> dict[str, Any]:
    fid = fact_id(i)
    label = label_of(i, shift)
    subject, obj = f"Subject_{i}", f"Object_{i % 13}"
    raw = f"{label}. The subject {subject} and {obj}."
    details: dict[str, Any] = {}
    error = None
    if failed(i, shift):
        error = "TimeoutError: the model did not answer in 60 s"
        details["error_type"] = "TimeoutError"
    if fid == HOSTILE_ID:
        subject, obj = f"Evil{SCRIPT}", IMG
        raw = f"F because {IMG}"
        details.update(
            documents=[{"doc_id": "d1", "url": "https://example.org/evil", "score": 1.0}],
            evidence=[{"doc_id": "d1", "chunk_id": 0, "similarity": 0.91,
                       "text": f"Evidence {IMG} and {SCRIPT} here; the cited part."},
                      {"doc_id": "d2", "chunk_id": 4, "similarity": 0.52,
                       "text": "An uncited passage."}])
    rec: dict[str, Any] = {
        "fact_id": fid, "label": label, "method": "DKA", "model": "ollama:a",
        "raw": raw, "raws": [raw] if i % 11 else ["unreadable", raw],
        "attempts": 1 if i % 11 else 2, "seconds": 0.1 + (i % 10) / 10,
        "tokens_in": 50 + i % 7, "tokens_out": 3, "error": error, "details": details,
        "dataset": "Mine", "gold": gold_of(i), "run_id": run_id, "subject": subject,
        "predicate": PREDICATES[i % len(PREDICATES)], "object": obj,
        "confidence": confidence_of(i),
    }
    if fid == HOSTILE_ID:
        rec["citations"] = [{"doc_id": "d1", "chunk_id": 0, "text": "the cited part"}]
        rec["conversation"] = [
            {"role": "system", "content": "You check facts.", "node": "ask"},
            {"role": "user", "content": f"Is this true? {subject} {obj}", "node": "ask"},
            {"role": "assistant", "content": "unreadable", "node": "ask"},
            {"role": "user", "content": "Answer T or F only.", "node": "reprompt"},
            {"role": "assistant", "content": raw, "node": "reprompt"}]
    if consensus:
        votes = [{"model": m, "label": label if k else gold_of(i), "raw": label,
                  "seconds": 0.2} for k, m in enumerate(("ollama:a", "ollama:b"))]
        details.update(votes=votes, decision="majority",
                       counts={"T": sum(v["label"] == "T" for v in votes),
                               "F": sum(v["label"] == "F" for v in votes), "NA": 0})
    return rec


def make_view_run(folder: Path, n: int, *, shift: int = 0, run_id: str = "view0001",
                  consensus: bool = False, method: str = "DKA") -> Path:
    """Write a run folder of ``n`` verdicts; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    models = ["ollama:a", "ollama:b"] if consensus else ["ollama:a"]
    (folder / "run.json").write_text(json.dumps({
        "dataset": "Mine", "strategy": method.lower(), "method": method, "models": models,
        "judge": "majority" if consensus else None, "source": "memory", "run_id": run_id,
        "settings": {}}))
    with (folder / "verdicts.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps(record(i, run_id, shift, consensus)) + "\n")
    return folder


STARTUP_SECONDS = 120


def start_view(*args: str) -> Served:
    """Start `kgcheck view ... --port 0` and read the address from its first line."""
    kgcheck = Path(sys.executable).parent / "kgcheck"
    proc = subprocess.Popen([str(kgcheck), "view", *args, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + STARTUP_SECONDS
    first = proc.stdout.readline()
    if not re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=\S+\n", first) or \
            time.monotonic() > deadline:
        proc.kill()
        raise AssertionError(f"kgcheck view printed no address first: {first!r}\n"
                             + (proc.stderr.read() if proc.stderr else ""))
    output = [first]
    threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True).start()
    url = first.strip()
    return Served(url, url.split("token=", 1)[1], proc, output)
