"""RDF/XML entity guard benchmark: the cost of checking the byte stream as it is parsed.

Writes an RDF/XML file of ``--facts`` descriptions (with the entity abbreviations an
ontology editor writes, so the guard also counts references), then parses it, interleaved,
with pyoxigraph directly and through ``EntityGuard``, ``--runs`` times each; reports the
median seconds and the ratio, measured in one run. Also times the refusal of the nested
entities ("billion laughs") that made 12.9 GB from 943 bytes before the guard.

Prints one JSON document.

    python benchmarks/bench_rdfxml_guard.py [--facts 200000] [--runs 5]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyoxigraph as ox  # noqa: E402

from kgcheck.data.rdf import RdfReader  # noqa: E402
from kgcheck.data.sources import TriplesError  # noqa: E402
from kgcheck.data.xml_guard import EntityGuard  # noqa: E402

HEAD = ('<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [\n <!ENTITY ex "http://example.org/" >\n'
        ' <!ENTITY owl "http://www.w3.org/2002/07/owl#" >\n]>\n'
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        'xmlns:ex="http://example.org/">\n')


def write_kg(path: Path, facts: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write(HEAD)
        for n in range(facts):
            fh.write(f'<rdf:Description rdf:about="&ex;s{n}"><rdf:type rdf:resource='
                     f'"&owl;Thing"/><ex:p>value {n}</ex:p></rdf:Description>\n')
        fh.write("</rdf:RDF>\n")


def timed(parse) -> float:  # noqa: ANN001 - a callable
    start = time.perf_counter()
    parse()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kg.rdf"
        write_kg(path, args.facts)
        data = path.read_bytes()
        plain: list[float] = []
        guarded: list[float] = []
        for _ in range(args.runs):
            plain.append(timed(lambda: sum(1 for _ in ox.parse(io.BytesIO(data),
                                                                ox.RdfFormat.RDF_XML))))
            guarded.append(timed(lambda: sum(1 for _ in ox.parse(
                EntityGuard(io.BytesIO(data), path), ox.RdfFormat.RDF_XML))))
        laughs = Path(folder) / "laughs.rdf"
        entities = ['<!ENTITY l0 "lol">'] + [
            f'<!ENTITY l{n} "{f"&l{n - 1};" * 10}">' for n in range(1, 10)]
        laughs.write_text(f'<!DOCTYPE rdf:RDF [{"".join(entities)}]>\n<rdf:RDF '
                          'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
                          'xmlns:ex="http://e.org/"><rdf:Description rdf:about="http://e.org/'
                          's"><ex:p>&l9;</ex:p></rdf:Description></rdf:RDF>\n')
        laughs_bytes = laughs.stat().st_size
        start = time.perf_counter()
        try:
            list(RdfReader(laughs))
            refused = False
        except TriplesError:
            refused = True
        refusal = time.perf_counter() - start
    print(json.dumps({
        "facts": args.facts, "triples": 2 * args.facts, "file_bytes": len(data),
        "runs": args.runs,
        "median_seconds": {"pyoxigraph": round(statistics.median(plain), 3),
                           "guarded": round(statistics.median(guarded), 3)},
        "guarded_over_plain": round(statistics.median(guarded) / statistics.median(plain), 3),
        "billion_laughs": {"bytes": laughs_bytes,
                           "refused": refused, "seconds": round(refusal, 4)},
    }, indent=1))


if __name__ == "__main__":
    main()
