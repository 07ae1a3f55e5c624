import pytest

from kgcheck.data.upstream import iter_records, open_data, recorded_files
from kgcheck.graphs.parsing import read_yes_no_json


def parse_rag_answer(answer):
    return read_yes_no_json(answer).label


@pytest.mark.parametrize(("answer", "label"), [
    ('```json\n{"output": "yes"}\n```', "T"),
    ("```json\n{'output': 'no'}\n``` \n", "F"),
    ('Here is the answer: { "output": "yes" } The documents support it.', "T"),
    ("Response: {'output': 'no'}", "F"),
    ('Yes {"output": "yes"}, the company makes this.', "T"),
    ("No.", "F"),
    ("yes", "T"),
    ('{"output": true}', "T"),
    ('{"output": "yes"} but later {"output": "no"}', "NA"),
    ("The documents do not mention the subject.", "NA"),
    ("", "NA"),
    (None, "NA"),
    ('{"output": "maybe"}', "NA"),
])
def test_parse_rag_answer(answer, label):
    assert parse_rag_answer(answer) == label


def test_parser_agrees_with_every_readable_recorded_yago_answer():
    src = open_data(None)
    files = [r for r in recorded_files(src) if r.method == "RAG" and r.dataset == "YAGO"]
    assert len(files) == 4
    readable = agree = 0
    for rec in files:
        for row in iter_records(src, rec.relpath):
            label = parse_rag_answer(row["full_answer"])
            if label != "NA":
                readable += 1
                agree += label == row["response"]
    assert readable == agree and readable >= 1386 * 4 - 10
