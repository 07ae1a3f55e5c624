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
        ("e.csv", "subject,predicate,object,label\nA,p,B,maybe\n", "unknown label 'maybe'; use T/F"),
        ("f.xlsx", "<x/>", "unsupported format '.xlsx'"),
        ("g.csv", "id,subject,predicate,object\n1,A,p,B\n1,C,q,D\n", "fact id '1' appears more"),
    ],
)
def test_malformed_files(tmp_path, name: str, content: str, message: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(TriplesError, match=message):
        read_triples(tmp_path / name)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        # A comma inside an unquoted field: never "John Smith bornIn Paris".
        ("subject,predicate,object\nJohn Smith,bornIn,Paris, France\n",
         r"kg.csv, row 2: 4 fields but the header has 3; a field holding the delimiter must be quoted"),
        ("subject,predicate,object,object\nA,p,B,C\n", r"kg.csv, row 1: the header names column 'object' twice"),
        ("subject,predicate,object\nA,p,B\n\"C,q,D\n" + "x" * 140_000 + "\n",
         r"kg.csv, row 3: malformed CSV \(a field is longer than 131,072 characters \(128 KiB\); an unclosed quote"),
    ],
)
def test_csv_rows_are_never_silently_shortened(tmp_path, content: str, message: str) -> None:
    (tmp_path / "kg.csv").write_text(content)
    with pytest.raises(TriplesError, match=message):
        read_triples(tmp_path / "kg.csv")


def test_quoted_commas_and_empty_trailing_fields_are_fine(tmp_path) -> None:
    (tmp_path / "kg.csv").write_text('subject,predicate,object\nJohn Smith,bornIn,"Paris, France",\n')
    assert read_triples(tmp_path / "kg.csv")[0].object == "Paris, France"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("latin.csv", "subject,predicate,object\nA,p,B\nJos\xe9,p,C\n".encode("latin-1"),
         r"latin.csv, line 3: not UTF-8 text \(byte 0xe9 at column 4\); save the file as UTF-8"),
        ("binary.csv", bytes(range(256)) * 4, r"binary.csv, line 1: holds NUL bytes, so it is a binary file"),
        ("binary.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00\xff", r"binary.jsonl, line 1: "),
    ],
)
def test_undecodable_files_name_file_and_line(tmp_path, name: str, content: bytes, message: str) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(TriplesError, match=message):
        read_triples(tmp_path / name)


def test_a_utf8_bom_is_accepted(tmp_path) -> None:
    (tmp_path / "excel.csv").write_bytes("subject,predicate,object\r\nZoë,p,B\r\n".encode("utf-8-sig"))
    assert read_triples(tmp_path / "excel.csv")[0].subject == "Zoë"
    (tmp_path / "bom.jsonl").write_bytes('{"subject": "A", "predicate": "p", "object": "B"}\n'.encode("utf-8-sig"))
    assert read_triples(tmp_path / "bom.jsonl")[0].id == "1"


def test_jsonl_id_zero_is_an_id_and_a_blank_id_is_an_error(tmp_path) -> None:
    (tmp_path / "zero.jsonl").write_text('{"id": 0, "subject": "A", "predicate": "p", "object": "B"}\n'
                                         '{"id": 1, "subject": "C", "predicate": "p", "object": "D"}\n')
    assert [f.id for f in read_triples(tmp_path / "zero.jsonl")] == ["0", "1"]
    (tmp_path / "blank.jsonl").write_text('{"id": "  ", "subject": "A", "predicate": "p", "object": "B"}\n')
    with pytest.raises(TriplesError, match=r"blank.jsonl, line 1: id is blank"):
        read_triples(tmp_path / "blank.jsonl")


@pytest.mark.parametrize(("target", "message"), [
    ("folder", "is a folder, not a file"),
    ("/dev/zero", "is not a regular file"),
    ("missing.csv", "file not found"),
])
def test_paths_that_are_not_files(tmp_path, target: str, message: str) -> None:
    (tmp_path / "folder").mkdir()
    path = target if target.startswith("/") else tmp_path / target
    with pytest.raises(TriplesError, match=message):
        read_triples(path)


def test_a_repeated_id_in_a_large_file_names_both_rows(tmp_path) -> None:
    rows = "".join(f"{i},S{i},p,O{i}\n" for i in range(50_000))
    (tmp_path / "big.csv").write_text("id,subject,predicate,object\n" + rows + "7,S,p,O\n")
    with pytest.raises(TriplesError, match=r"fact id '7' appears more than once \(facts 8 and 50,001\)"):
        read_triples(tmp_path / "big.csv")
