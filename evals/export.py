"""Export a run's verdicts for a curator: CSV, JSONL, RDF (N-Triples, Turtle), or changes.

``sparql`` and ``patch`` write the changes the verdicts call for (``kgcheck.evals.patch``):
a SPARQL 1.1 Update or an RDF Patch deleting the triples judged false and inserting
corrections a person accepted.

CSV and JSONL hold one row per fact: the triple as given, the verdict, the model and
method, the model's reason (or the evidence documents, for RAG), the time it was checked,
the gold label and, when the run folder holds a review (``labels.csv``), the reviewer's
label. RDF comes in two shapes:

- ``plain``: the selected triples themselves, e.g. every triple judged false
  (``--only F``), ready for a deletion review;
- ``annotated`` (default): each verdict as a reified statement (``rdf:Statement`` with
  ``rdf:subject``/``rdf:predicate``/``rdf:object``) that carries its verdict, model, method
  and time, in the ``kgc:`` vocabulary with PROV-O terms where they fit
  (docs/guides/exports.md). Reification rather than RDF-star: every RDF 1.1 tool reads it.

A fact read from RDF keeps its own terms (``rdf`` in the verdict record). Terms that are not
IRIs (YAGO and FactBench names, your CSV's strings) get IRIs minted under
``urn:kgcheck:term:<dataset>:``; a non-IRI object of a triple whose subject is an IRI (a
DBpedia value such as ``221.0``) becomes a literal. RDF is written by pyoxigraph.

``factcheck`` writes the run as the FactCheck study code writes its results, so its
evaluation and consensus scripts read it: a JSON list of ``{id, method, response,
response_time, success, timestamp}`` (RAG adds ``full_answer``) named
``<Dataset>_open-source_<model>_<method>.json``; a consensus run as its majority-vote file,
``{"metadata", "statistics", "results": [{id, majority_decision, individual_votes, ...}]}``
named ``<Dataset>_majority-vote_<YYYYmmdd-HHMMSS>.json``.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import pyoxigraph as ox

from kgcheck.arguments import Arg, literal
from kgcheck.data.atomic import atomic_output
from kgcheck.data.cells import neutralise
from kgcheck.data.facts import readable_term
from kgcheck.data.rdf_terms import (
    TermError,
    comment_text,
    literal_from_term,
)
from kgcheck.data.runfolder import (
    LABELS_FILE,
    RUN_INFO,
    VERDICTS,
    LabelRow,
    has_verdicts,
    parse_only,
    read_labels,
    read_run_info,
    read_verdicts,
)
from kgcheck.evals.export_terms import TERM, ExportError, triple_terms
from kgcheck.evals.patch import write_changes

FORMATS = ("csv", "jsonl", "nt", "ttl", "sparql", "patch", "factcheck")
# Formats that write the changes the verdicts call for, not the verdicts.
CHANGE_FORMATS = ("sparql", "patch")
RDF_FORMATS = {"nt": ox.RdfFormat.N_TRIPLES, "ttl": ox.RdfFormat.TURTLE}
RDF_SHAPES = ("annotated", "plain")
COLUMNS = ("fact_id", "subject", "predicate", "object", "subject_name", "predicate_name",
           "object_name", "verdict", "method", "model", "reason",
           "evidence", "checked_at", "gold", "error", "review_label", "review_note", "reviewer",
           "reviewed_at", "dataset", "run_id", "confidence", "confidence_source", "rationale",
           "cited", "correction_part", "correction_value", "review_correction",
           "review_corrected_value")
# Longest reason text kept in an export; raw answers with reasoning can be long.
MAX_REASON_CHARS = 2000

KGC = "urn:kgcheck:vocab:"
VERDICT = "urn:kgcheck:verdict:"
RUN = "urn:kgcheck:run:"
MODEL = "urn:kgcheck:model:"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
PROV = "http://www.w3.org/ns/prov#"
XSD = "http://www.w3.org/2001/XMLSchema#"
PREFIXES = {"kgc": KGC, "rdf": RDF, "rdfs": RDFS, "prov": PROV, "xsd": XSD}
# A verdict label as a resource of the vocabulary.
LABEL_TERMS = {"T": "True", "F": "False", "NA": "NotApplicable", "NEI": "NotEnoughEvidence"}


@dataclass
class Exported:
    """What an export wrote: where, in which format, and how many verdicts."""

    path: Path | None
    format: str
    count: int


def _reason(record: Mapping[str, Any]) -> str:
    details = record.get("details") or {}
    text = record.get("error") or details.get("reason") or record.get("raw") or ""
    return str(text).strip()[:MAX_REASON_CHARS]


def _evidence(record: Mapping[str, Any]) -> str:
    documents = (record.get("details") or {}).get("documents") or []
    return " ".join(str(d.get("url") or d.get("doc_id")) for d in documents
                    if isinstance(d, dict) and (d.get("url") or d.get("doc_id")))


def rows(records: Iterable[Mapping[str, Any]],
         review: Mapping[str, LabelRow]) -> Iterator[dict[str, Any]]:
    """Flatten verdict records (and their review) into export rows with ``COLUMNS``."""
    for record in records:
        fid = str(record["fact_id"])
        seen: Mapping[str, str] = review.get(fid) or {}  # type: ignore[assignment]
        names = record.get("names")
        given: Mapping[str, str] = names if isinstance(names, Mapping) else {}
        yield {
            "fact_id": fid,
            "subject": record.get("subject"),
            "predicate": record.get("predicate"),
            "object": record.get("object"),
            # The KG's name of a term (rdfs:label ...) where it gave one, else one read off
            # the term itself (``http://dbpedia.org/resource/Ada_Lovelace`` -> Ada Lovelace).
            **{f"{key}_name": given.get(key) or readable_term(str(record.get(key) or ""))
               for key in ("subject", "predicate", "object")},
            "names": dict(given),
            "name_terms": record.get("name_terms") or None,
            "verdict": record.get("label", "NA"),
            "method": record.get("method"),
            "model": record.get("model"),
            "reason": _reason(record),
            "evidence": _evidence(record),
            "checked_at": record.get("checked_at"),
            "gold": record.get("gold"),
            "error": record.get("error"),
            "review_label": seen.get("label") or None,
            "review_note": seen.get("note") or None,
            "reviewer": seen.get("reviewer") or None,
            "reviewed_at": seen.get("reviewed_at") or None,
            "dataset": record.get("dataset"),
            "run_id": record.get("run_id"),
            "confidence": record.get("confidence"),
            "confidence_source": record.get("confidence_source"),
            "rationale": record.get("rationale"),
            "cited": " ".join(str(c.get("url") or c.get("doc_id"))
                              for c in record.get("citations") or []) or None,
            "correction_part": (record.get("correction") or {}).get("part"),
            "correction_value": (record.get("correction") or {}).get("value"),
            "review_correction": seen.get("correction") or None,
            "review_corrected_value": seen.get("corrected_value") or None,
            "rdf": record.get("rdf"),
        }


# --- RDF ------------------------------------------------------------------------------


def _kgc(name: str) -> ox.NamedNode:
    return ox.NamedNode(KGC + name)


def _safe(text: str) -> str:
    return quote(text, safe="")


def annotated_triples(row: Mapping[str, Any],
                      described: set[str] | None = None) -> Iterator[ox.Triple]:
    """Describe one verdict as a reified statement in the kgc vocabulary (with PROV-O).

    Models and runs are described once per ``described`` set (their IRIs are added to it).
    """
    described = set() if described is None else described
    s, p, o = triple_terms(row)
    yield from name_triples(row, (s, p, o), described)
    run_id = str(row.get("run_id") or "run")
    node = ox.NamedNode(f"{VERDICT}{_safe(run_id)}:{_safe(str(row['fact_id']))}")
    a = ox.NamedNode(RDF + "type")
    yield ox.Triple(node, a, ox.NamedNode(RDF + "Statement"))
    yield ox.Triple(node, a, _kgc("Verdict"))
    yield ox.Triple(node, a, ox.NamedNode(PROV + "Entity"))
    yield ox.Triple(node, ox.NamedNode(RDF + "subject"), s)
    yield ox.Triple(node, ox.NamedNode(RDF + "predicate"), p)
    yield ox.Triple(node, ox.NamedNode(RDF + "object"), o)
    yield ox.Triple(node, _kgc("factId"), ox.Literal(str(row["fact_id"])))
    label = str(row.get("verdict") or "NA")
    yield ox.Triple(node, _kgc("verdict"), _kgc(LABEL_TERMS.get(label, "NotApplicable")))
    if row.get("method"):
        yield ox.Triple(node, _kgc("method"), ox.Literal(str(row["method"])))
    if row.get("model"):
        for spec in str(row["model"]).split(","):
            agent = ox.NamedNode(MODEL + _safe(spec))
            yield ox.Triple(node, ox.NamedNode(PROV + "wasAttributedTo"), agent)
            if agent.value not in described:
                described.add(agent.value)
                yield ox.Triple(agent, a, ox.NamedNode(PROV + "SoftwareAgent"))
                yield ox.Triple(agent, ox.NamedNode(RDFS + "label"), ox.Literal(spec))
    run = ox.NamedNode(RUN + _safe(run_id))
    yield ox.Triple(node, ox.NamedNode(PROV + "wasGeneratedBy"), run)
    if run.value not in described:
        described.add(run.value)
        yield ox.Triple(run, a, ox.NamedNode(PROV + "Activity"))
    if row.get("checked_at"):
        yield ox.Triple(node, ox.NamedNode(PROV + "generatedAtTime"),
                        ox.Literal(str(row["checked_at"]),
                                   datatype=ox.NamedNode(XSD + "dateTime")))
    for key, name in (("reason", "reason"), ("evidence", "evidence"), ("error", "error"),
                      ("review_note", "reviewNote"), ("reviewer", "reviewer")):
        if row.get(key):
            yield ox.Triple(node, _kgc(name), ox.Literal(str(row[key])))
    if row.get("confidence") is not None:
        yield ox.Triple(node, _kgc("confidence"),
                        ox.Literal(str(row["confidence"]), datatype=ox.NamedNode(XSD + "double")))
    if row.get("rationale"):
        yield ox.Triple(node, _kgc("rationale"), ox.Literal(str(row["rationale"])))
    if row.get("gold") in ("T", "F"):
        yield ox.Triple(node, _kgc("goldLabel"), _kgc(LABEL_TERMS[row["gold"]]))
    review = str(row.get("review_label") or "").strip().upper()
    if review in ("T", "F"):
        yield ox.Triple(node, _kgc("reviewLabel"), _kgc(LABEL_TERMS[review]))
    elif review:
        yield ox.Triple(node, _kgc("reviewLabel"), _kgc("Skipped"))
    if row.get("reviewed_at"):
        yield ox.Triple(node, _kgc("reviewedAt"), ox.Literal(str(row["reviewed_at"])))


def name_triples(row: Mapping[str, Any], terms: Sequence[Any],
                 described: set[str]) -> Iterator[ox.Triple]:
    """Label a verdict's terms with ``rdfs:label``, once per term.

    Only names with a source are stated: the KG's own (``rdfs:label``, ``skos:prefLabel``
    ... of the input), and the readable form of a term kgcheck minted an IRI for.
    """
    given = row.get("names") or {}
    for key, term in zip(("subject", "predicate", "object"), terms, strict=True):
        if not isinstance(term, ox.NamedNode) or f"label {term.value}" in described:
            continue
        name = given.get(key) or (row.get(f"{key}_name") if term.value.startswith(TERM)
                                  else None)
        if name:
            described.add(f"label {term.value}")
            yield ox.Triple(term, ox.NamedNode(RDFS + "label"), _name_literal(row, key, name))


def _name_literal(row: Mapping[str, Any], key: str, name: Any) -> ox.Literal:
    """Return a name as the KG wrote it: with its language tag or datatype, when known."""
    written = (row.get("name_terms") or {}).get(key)
    if not written:
        return ox.Literal(str(name))
    try:
        literal = literal_from_term(str(written))
    except TermError as exc:
        raise ExportError(f"fact {comment_text(str(row['fact_id']))}: its {key}'s name term "
                          f"is no literal ({exc})") from None
    # The name shown and the term kept go together; one edited alone is not trusted.
    return literal if literal.value == str(name) else ox.Literal(str(name))


def rdf_triples(export_rows: Iterable[Mapping[str, Any]], shape: str) -> Iterator[ox.Triple]:
    """Turn export rows into RDF: the triples themselves, or annotated verdicts."""
    described: set[str] = set()
    for row in export_rows:
        if shape == "plain":
            yield ox.Triple(*triple_terms(row))
        else:
            yield from annotated_triples(row, described)


# --- writing --------------------------------------------------------------------------


def _target(out: str | Path | None, name: str | None = None) -> Path | None:
    if out is None or str(out) == "-":
        return None
    path = Path(out)
    if path.is_dir() and name:
        return path / name
    if name and str(out).endswith(("/", "\\")):
        raise ExportError(f"{{out}}: folder {literal(str(path))} does not exist",
                          out=Arg("out", str(out)))
    if path.is_dir():
        raise ExportError("{out} is a folder; give a file name", out=Arg("out", str(path)))
    if not path.parent.is_dir():
        raise ExportError(f"{{out}}: folder {literal(str(path.parent))} does not exist",
                          out=Arg("out", str(path)))
    return path


def write_rows(export_rows: Iterable[dict[str, Any]], fmt: str, sink: IO[bytes], *,
               shape: str = "annotated") -> int:
    """Write rows to a binary sink in ``fmt``; return how many verdicts were written."""
    count = 0

    def counted() -> Iterator[dict[str, Any]]:
        nonlocal count
        for row in export_rows:
            count += 1
            yield row

    if fmt in RDF_FORMATS:
        prefixes = PREFIXES if fmt == "ttl" else None
        ox.serialize(rdf_triples(counted(), shape), sink, format=RDF_FORMATS[fmt],
                     prefixes=prefixes)
        return count
    text = io.TextIOWrapper(sink, encoding="utf-8", newline="")
    try:
        if fmt == "csv":
            writer = csv.DictWriter(text, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            for row in counted():
                # Triple values and notes are untrusted: no cell may run as a formula.
                writer.writerow({k: "" if row.get(k) is None else neutralise(row[k])
                                 for k in COLUMNS})
        else:
            for row in counted():
                text.write(json.dumps({k: v for k, v in row.items()
                                       if k in COLUMNS or (k in ("rdf", "names", "name_terms")
                                                           and v)})
                           + "\n")
    finally:
        text.flush()
        text.detach()
    return count


def export_run(run_dir: str | Path, fmt: str, out: str | Path | None = None, *,
               only: str | Sequence[str] | None = None, shape: str = "annotated") -> Exported:
    """Export a run folder's verdicts (the last per fact) to ``out`` (None or "-": stdout)."""
    folder = Path(run_dir)
    if fmt not in FORMATS:
        raise ExportError(f"{{format}}: expected one of {', '.join(FORMATS)}",
                          format=Arg("format", fmt))
    if shape not in RDF_SHAPES:
        raise ExportError(f"{{rdf}}: expected one of {', '.join(RDF_SHAPES)}",
                          rdf=Arg("rdf", shape))
    if not folder.is_dir():
        raise ExportError(f"{folder}: run folder not found")
    if not has_verdicts(folder) or not (folder / RUN_INFO).is_file():
        raise ExportError(f"{folder}: no {VERDICTS} and {RUN_INFO}; is it a `kgcheck run` "
                          "folder?")
    labels = parse_only(only, error=ExportError)
    if labels and fmt in CHANGE_FORMATS:
        raise ExportError(f"--only does not apply to --format {fmt}: it deletes the facts "
                          "judged (or labelled) false and inserts accepted corrections")
    review = read_labels(folder / LABELS_FILE) if (folder / LABELS_FILE).is_file() else {}
    every = read_verdicts(folder)
    records = [r for r in every.values() if not labels or r.get("label", "NA") in labels]
    if fmt == "factcheck":
        return _export_factcheck(folder, records, out)

    def write(sink: IO[bytes]) -> int:
        if fmt in CHANGE_FORMATS:
            return write_changes(rows(records, review), every, review, fmt, sink)
        return write_rows(rows(records, review), fmt, sink, shape=shape)

    path = _target(out)
    if path is None:
        count = write(sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return Exported(None, fmt, count)
    try:
        # Whole or not at all: a full disk or a kill part way leaves the old export intact.
        with atomic_output(path) as sink:
            count = write(sink)
    except OSError as exc:
        raise ExportError(f"{path}: cannot write the export ({exc.strerror or exc}); "
                          "an existing file there is unchanged") from None
    return Exported(path, fmt, count)


# --- FactCheck's result files ---------------------------------------------------------


def upstream_model(spec: str) -> str:
    """Return a model as FactCheck names it: ``replay:gemma2:9b`` -> ``gemma2:9b``."""
    from kgcheck.providers.resolve import PROVIDERS

    provider, sep, name = spec.partition(":")
    return name if sep and name and provider in PROVIDERS else spec


def _stamp(checked_at: Any) -> str:
    # FactCheck's timestamps: "2025-05-27 10:37:10" (local time there, UTC here).
    text = str(checked_at or "")
    return text.replace("T", " ").removesuffix("Z")[:19]


def _is_consensus(info: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> bool:
    return len(info.get("models") or []) > 1 or any(
        (r.get("details") or {}).get("strategy") == "consensus" for r in records)


def factcheck_name(info: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> str:
    """Return the file name FactCheck gives a run's results (its scripts read it from there)."""
    dataset = str(info.get("dataset") or "kgcheck").replace("_", "-") or "kgcheck"
    if _is_consensus(info, records):
        last = max((str(r.get("checked_at") or "") for r in records), default="")
        digits = "".join(c for c in last if c.isdigit())[:14].ljust(14, "0")
        return f"{dataset}_majority-vote_{digits[:8]}-{digits[8:]}.json"
    models = info.get("models") or [records[0].get("model") if records else "unknown"]
    model = upstream_model(str(models[0])).replace("_", "-").replace("/", "-")
    method = str(info.get("method") or "dka").lower()
    return f"{dataset}_open-source_{model}_{method}.json"


def _response(label: str) -> str:
    # An unreadable answer stays unreadable for FactCheck's scripts too ("NA" -> UNKNOWN).
    return label if label in ("T", "F") else "NA"


def factcheck_record(record: Mapping[str, Any], method: str) -> dict[str, Any]:
    """Return one verdict as a record of FactCheck's result file."""
    label = str(record.get("label") or "NA")
    row: dict[str, Any] = {"id": str(record["fact_id"]), "method": method}
    if method == "RAG":
        row["full_answer"] = str(record.get("raw") or "")
    row.update({
        "response": _response(label),
        "response_time": float(record.get("seconds") or 0.0),
        # A failed call is not a verdict; an unreadable answer is a successful call.
        "success": not record.get("error"),
        "timestamp": _stamp(record.get("checked_at")),
    })
    return row


def _majority_vote(info: Mapping[str, Any], records: Sequence[Mapping[str, Any]],
                   name: str) -> dict[str, Any]:
    method = str(info.get("method") or "DKA")
    results: list[dict[str, Any]] = []
    ties = 0
    for record in records:
        details = record.get("details") or {}
        votes = details.get("votes") or []
        counts = details.get("counts") or {}
        top = max((int(counts.get(k) or 0) for k in ("T", "F")), default=0)
        label = str(record.get("label") or "NA")
        tie = bool(votes) and counts.get("T") == counts.get("F")
        ties += tie
        level = ("tie" if tie else "unanimous" if votes and top == len(votes)
                 else "strong_majority" if votes and top >= 0.75 * len(votes)
                 else "weak_majority")
        results.append({
            "id": str(record["fact_id"]),
            "method": "MajorityVote",
            "majority_decision": label if label in ("T", "F") else "UNKNOWN",
            "confidence": top / len(votes) if votes else 0.0,
            "consensus_level": level,
            "tie_broken": bool(details.get("judge_decided")),
            "tie_breaker_info": ({"final_tie_breaker_used": details.get("judge_setting"),
                                  "model": upstream_model(str(details.get("judge")))}
                                 if details.get("judge_called") else None),
            "individual_votes": [{
                "model_name": upstream_model(str(v.get("model") or "")),
                "method": method.lower(),
                "response": str(v.get("raw") or _response(str(v.get("label")))),
                "normalized_response": (v.get("label") if v.get("label") in ("T", "F")
                                        else "UNKNOWN"),
                "success": not v.get("error"),
                "response_time": float(v.get("seconds") or 0.0),
                "timestamp": _stamp(record.get("checked_at")),
                "source_file": "",
            } for v in votes],
            "success": label in ("T", "F"),
        })
    decided = sum(1 for r in results if r["success"])
    return {
        "metadata": {"dataset": info.get("dataset"), "source_files": [name],
                     "majority_threshold": 3, "total_facts": len(results),
                     "decidable_facts": decided,
                     "members": [upstream_model(str(m)) for m in info.get("models") or []]},
        "statistics": {"facts_with_majority": len(results) - ties, "ties_encountered": ties,
                       "ties_resolved": sum(1 for r in results if r["tie_broken"]),
                       "tie_percentage": 100.0 * ties / len(results) if results else 0.0},
        "results": results,
    }


def _export_factcheck(folder: Path, records: list[dict[str, Any]],
                      out: str | Path | None) -> Exported:
    info = read_run_info(folder, ExportError)
    name = factcheck_name(info, records)
    if _is_consensus(info, records):
        document: Any = _majority_vote(info, records, name)
    else:
        method = str(info.get("method") or "DKA").upper()
        document = [factcheck_record(r, method) for r in records]
    text = json.dumps(document, indent=4, ensure_ascii=False) + "\n"
    path = _target(out, name)
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return Exported(None, "factcheck", len(records))
    try:
        with atomic_output(path) as sink:
            sink.write(text.encode("utf-8"))
    except OSError as exc:
        raise ExportError(f"{path}: cannot write the export ({exc.strerror or exc}); "
                          "an existing file there is unchanged") from None
    return Exported(path, "factcheck", len(records))
