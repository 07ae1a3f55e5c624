"""A user's own facts from CSV, TSV and JSON Lines; malformed rows name file and row."""

from __future__ import annotations

import pytest

from kgcheck.data.triples import TriplesError, read_triples


def test_csv_tsv_jsonl(tmp_path) -> None:
    (tmp_path / "kg.csv").write_text("subject,predicate,object,label\nAda Lovelace,field,Mathematics,1\n"
                                     "Ada Lovelace,birthPlace,Paris,false\n")
    (tmp_path / "kg.tsv").write_text("id\tsubject\tpredicate\tobject\nq1\tA\tp\tB\n")
    (tmp_path / "kg.jsonl").write_text('{"subject": "A", "predicate": "p", "object": "B"}\n\n'
                                       '{"id": "z", "subject": "C", "predicate": "q", "object": "D", "label": "T"}\n')
    csv_facts = read_triples(tmp_path / "kg.csv")
    assert [(f.id, f.label, f.dataset) for f in csv_facts] == [("1", True, "kg"), ("2", False, "kg")]
    assert read_triples(tmp_path / "kg.tsv")[0].id == "q1"
    jsonl = read_triples(tmp_path / "kg.jsonl")
    assert [(f.id, f.label) for f in jsonl] == [("1", None), ("z", True)]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.csv", "subject,object\nA,B\n", "header lacks predicate"),
        ("b.csv", "subject,predicate,object\nA,,B\n", r"b.csv, row 2: missing predicate"),
        ("c.jsonl", '{"subject": "A", "predicate": "p"}\n', r"c.jsonl, line 1: missing object"),
        ("d.jsonl", '{"subject": "A",\n', r"d.jsonl, line 1: malformed JSON"),
        ("e.csv", "subject,predicate,object,label\nA,p,B,maybe\n", "label 'maybe' is not"),
        ("f.xlsx", "<x/>", "unsupported format '.xlsx'"),
        ("g.csv", "id,subject,predicate,object\n1,A,p,B\n1,C,q,D\n", "fact id '1' appears more"),
    ],
)
def test_malformed_files(tmp_path, name: str, content: str, message: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(TriplesError, match=message):
        read_triples(tmp_path / name)
