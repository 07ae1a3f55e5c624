"""Hostile inputs that once lost data or escaped their bounds, each refused or contained.

Run alone with ``pytest tests/test_attacks.py``. Each section is one attack: a correction
export that could wipe a KG, an explorer index pointing outside its run, JSON-LD contexts
fetched from the network, entity expansion in rule inputs, archives and lines too large.
Memory caps are measured by a child process's peak RSS, not assumed.
"""

from __future__ import annotations

# --- 1. Correction exports: fact ids and free text cannot inject SPARQL Update ---------------



# --- 2. The explorer's index cannot point outside the run folder ---------------------------

def _peak_rss_mb(pid: int) -> float:
    """Return a live process's peak resident memory (VmHWM), in MB."""
    import re
    from pathlib import Path

    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)[1]) / 1024


def _plant_hostile_index(index, run, rows: dict[str, tuple[str, int, int]]) -> None:
    """Point facts at other files, offsets and lengths, in the index and in the run folder."""
    import shutil
    import sqlite3

    conn = sqlite3.connect(index)
    with conn:
        conn.executemany("UPDATE facts SET file = ?, offset = ?, length = ? WHERE fact_id = ?",
                         [(*where, fid) for fid, where in rows.items()])
    conn.close()
    # Where an index was once kept, in the run folder anyone writing it may edit.
    if index != run / ".view-index.sqlite":
        shutil.copyfile(index, run / ".view-index.sqlite")


def test_a_hostile_index_reads_nothing_outside_the_run_and_stays_small(tmp_path) -> None:
    import json

    import httpx

    from kgcheck.view.explorer import Explorer
    from tests.served import stop_served
    from tests.view_runs import fact_id, make_view_run, start_view

    run = make_view_run(tmp_path / "run", 20)
    secret = json.dumps({"fact_id": fact_id(0), "label": "T", "raw": "SECRET-OUTSIDE"})
    outside = tmp_path / "outside.jsonl"
    outside.write_text(secret + "\n")
    explorer = Explorer([run])
    index = explorer.runs[0].index
    explorer.close()
    size = (run / "verdicts.jsonl").stat().st_size
    _plant_hostile_index(index, run, {
        fact_id(0): ("../outside.jsonl", 0, len(secret)),
        fact_id(1): (str(outside), 0, len(secret)),
        fact_id(2): ("/dev/zero", 0, 400_000_000),
        fact_id(3): ("verdicts.jsonl", 0, 400_000_000),
        fact_id(4): ("verdicts.jsonl", size - 10, 100),
    })
    served = start_view(str(run))
    try:
        client = httpx.Client(base_url=served.base, headers={"X-View-Token": served.token},
                              timeout=60)
        assert client.get("/api/fact", params={"id": fact_id(5)}).status_code == 200
        before = _peak_rss_mb(served.proc.pid)
        for i in range(5):
            reply = client.get("/api/fact", params={"id": fact_id(i)})
            assert reply.status_code == 400, (i, reply.text[:300])
            assert "SECRET" not in reply.text
            assert "the index" in reply.json()["error"], reply.text
        grown = _peak_rss_mb(served.proc.pid) - before
        # The cap on one record is 16 MiB; 400 MB read from /dev/zero would show here.
        assert grown < 48, f"the server grew by {grown:.0f} MB"
        client.close()
    finally:
        stop_served(served)




# --- 3. JSON-LD shapes cannot fetch a remote or file context -------------------------------



# --- 4. Entity expansion in every RDF/XML reader -------------------------------------------



# --- 5. Corpus import caps the decompressed size --------------------------------------------



# --- 6. A line too long is refused with one line naming the input ----------------------------


