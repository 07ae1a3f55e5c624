"""What kgcheck reads from a user's files stays in bounds: ids, JSON depth, numbers, caps."""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from kgcheck.data import safe_json
from kgcheck.data.facts import Fact
from kgcheck.data.gold import read_gold
from kgcheck.data.input_limits import LINE_BYTES
from kgcheck.data.labels import LabelsError, read_labels
from kgcheck.data.runfolder import VerdictSink
from kgcheck.data.sources import TriplesError
from kgcheck.data.triples import read_triples
from kgcheck.evals.errors.outputs import ErrorsInputError, read_errors
from kgcheck.runs.importing import VerdictImportError, read_verdict_file

ROOT = Path(__file__).resolve().parents[2]
FACT = '"subject": "a", "predicate": "p", "object": "b"'
DEEP = "[" * 150_000 + "]" * 150_000


# --- fact ids with control characters -------------------------------------------------------

@pytest.mark.parametrize(("name", "text", "where"), [
    ("kg.jsonl", f'{{"id": "x\\nDROP ALL ;\\n#", {FACT}}}\n', "kg.jsonl, line 1"),
    ("kg.csv", 'id,subject,predicate,object\nok,a,p,b\n"x\nDROP ALL ;\n#",a,p,b\n',
     "kg.csv, row 3"),
    ("kg.tsv", "id\tsubject\tpredicate\tobject\nx\x85y\ta\tp\tb\n", "kg.tsv, row 2"),
    ("kg.jsonl", f'{{"id": "x\\u2028y", {FACT}}}\n', "kg.jsonl, line 1"),
])
def test_a_fact_id_with_a_control_character_is_refused_on_input(
        tmp_path: Path, name: str, text: str, where: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TriplesError) as refused:
        read_triples(path)
    message = str(refused.value)
    assert message.startswith(f"{path.parent / where}: fact id ")
    assert "holds a control character" in message and "\n" not in message


def test_imported_verdicts_and_labels_refuse_such_an_id(tmp_path: Path) -> None:
    study = tmp_path / "YAGO_open-source_m_dka.json"
    study.write_text(json.dumps([{"id": "x\nDROP ALL ;\n#", "response": "T"}]))
    with pytest.raises(VerdictImportError, match=r"record 0: fact id 'x\\nDROP"):
        read_verdict_file(study)
    table = tmp_path / "v.csv"
    table.write_text('fact_id,label\n"a\rb",T\n')
    with pytest.raises(VerdictImportError, match=r"v\.csv, row 2: fact id 'a\\rb' holds"):
        read_verdict_file(table)
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"fact_id": "a\\u0000b", "label": "T"}\n')
    with pytest.raises(LabelsError, match=r"labels\.jsonl, line 1: fact id .* \(U\+0000\)"):
        read_labels(labels)
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": "a\\tb", "label": "T"}\n')
    with pytest.raises(TriplesError, match=r"gold\.jsonl, line 1: fact id 'a\\tb'"):
        read_gold(gold)


def test_a_fact_itself_refuses_such_an_id() -> None:
    assert Fact(id="x y", subject="a", predicate="p", object="b").id == "x y"
    with pytest.raises(ValidationError, match="control character"):
        Fact(id="x\nDROP ALL ;\n#", subject="a", predicate="p", object="b")


# --- JSON nested too deeply, in every JSON reader -------------------------------------------

def _study(path: Path) -> None:
    read_verdict_file(path)


def _deep_readers(tmp: Path) -> list[tuple[Path, str, Callable[[Path], Any], type]]:
    errors = tmp / "analysis"
    errors.mkdir()
    return [
        (tmp / "YAGO_open-source_m_dka.json", DEEP, _study, VerdictImportError),
        (tmp / "v.jsonl", DEEP, read_verdict_file, VerdictImportError),
        (tmp / "kg.jsonl", f'{{"id": "f", {FACT}, "x": {DEEP}}}', read_triples,
         TriplesError),
        (tmp / "gold.jsonl", DEEP, read_gold, TriplesError),
        (tmp / "labels.jsonl", DEEP, read_labels, LabelsError),
        (errors / "errors.jsonl", DEEP, lambda _p: read_errors(errors), ErrorsInputError),
    ]


def test_json_nested_150_000_levels_deep_is_one_line_naming_the_file(tmp_path: Path) -> None:
    for path, text, read, error in _deep_readers(tmp_path):
        path.write_text(text + "\n")
        with pytest.raises(error) as refused:
            read(path)
        assert str(refused.value).startswith(str(path)), refused.value
        assert "nested deeper than 64 levels" in str(refused.value)


def test_the_depth_cap_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    nested = "[" * 100 + "]" * 100
    with pytest.raises(ValueError, match="nested deeper than 64"):
        safe_json.loads(nested, "x")
    monkeypatch.setenv("KGCHECK_MAX_JSON_DEPTH", "100")
    assert safe_json.loads(nested, "x") is not None
    # Brackets inside strings are text, not depth.
    assert safe_json.loads('{"a": "%s"}' % ("[" * 500), "x") == {"a": "[" * 500}
    monkeypatch.setenv("KGCHECK_MAX_JSON_DEPTH", "none")
    with pytest.raises(ValueError, match=r"\$KGCHECK_MAX_JSON_DEPTH='none': expected a whole"):
        safe_json.loads("[]", "x")


# --- numbers: non-finite refused on input, never written ------------------------------------

@pytest.mark.parametrize(("value", "reason"), [
    ("1e999999", "the number 1e999999 is out of range"),
    ("-1e400", "the number -1e400 is out of range"),
    ("NaN", "NaN is not a JSON number"),
    ("Infinity", "Infinity is not a JSON number"),
])
def test_an_imported_non_finite_number_is_refused(tmp_path: Path, value: str,
                                                  reason: str) -> None:
    study = tmp_path / "YAGO_open-source_m_dka.json"
    study.write_text(f'[{{"id": "f1", "response": "T", "response_time": {value}}}]')
    with pytest.raises(VerdictImportError, match=f"^{study}: {reason}"):
        read_verdict_file(study)


def test_a_negative_response_time_is_refused(tmp_path: Path) -> None:
    study = tmp_path / "YAGO_open-source_m_dka.json"
    study.write_text('[{"id": "f1", "response": "T", "response_time": -3}]')
    with pytest.raises(VerdictImportError, match=r"record 0: response_time -3 is not"):
        read_verdict_file(study)


def test_a_5000_digit_integer_names_the_file(tmp_path: Path) -> None:
    study = tmp_path / "YAGO_open-source_m_dka.json"
    study.write_text('[{"id": %s, "response": "T"}]' % ("9" * 5000))
    with pytest.raises(VerdictImportError, match=f"^{study}: an integer of 5,000 digits"):
        read_verdict_file(study)
    table = tmp_path / "v.jsonl"
    table.write_text('{"fact_id": "f1", "label": %s}\n' % ("1" * 5000))
    with pytest.raises(VerdictImportError, match=r"v\.jsonl, line 1: an integer of 5,000"):
        read_verdict_file(table)


def test_a_run_file_is_never_written_with_nan(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.jsonl"
    sink = VerdictSink(path)
    try:
        with pytest.raises(ValueError, match="not JSON compliant"):
            sink.write({"fact_id": "f1", "seconds": math.inf})
        sink.write({"fact_id": "f2", "seconds": 1.5})
    finally:
        import os

        os.close(sink.fd)
    assert path.read_text() == '{"fact_id": "f2", "seconds": 1.5}\n'
    with pytest.raises(ValueError):
        safe_json.dumps({"f1": math.nan})


# --- the caps -------------------------------------------------------------------------------

def test_a_line_at_the_cap_is_read_and_one_byte_more_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    line = f'{{"id": "f", {FACT}, "pad": "'
    line += "x" * (200 - len(line) - 2) + '"}'
    assert len(line) == 200
    path = tmp_path / "kg.jsonl"
    path.write_text(line + "\n" + line.replace('"f"', '"g"') + "\r\n")
    monkeypatch.setenv(LINE_BYTES.env, "201")
    assert [f.id for f in read_triples(path)] == ["f", "g"]
    monkeypatch.setenv(LINE_BYTES.env, "200")
    with pytest.raises(TriplesError, match=r"kg\.jsonl, line 2: longer than 200 bytes"):
        read_triples(path)


def test_a_json_file_over_the_size_cap_is_refused_before_reading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study = tmp_path / "YAGO_open-source_m_dka.json"
    study.write_text(json.dumps([{"id": f"f{n}", "response": "T"} for n in range(100)]))
    assert len(read_verdict_file(study).verdicts) == 100
    monkeypatch.setenv("KGCHECK_MAX_JSON_BYTES", "1000")
    with pytest.raises(VerdictImportError, match=f"^{study}: larger than 1,000 bytes"):
        read_verdict_file(study)


# --- one JSON loader ------------------------------------------------------------------------

# Calls of json.load/json.loads that read no user's input, each with why.
TRUSTED_JSON_CALLS = {
    "kgcheck/data/safe_json.py": "the loader itself",
    "kgcheck/runs/runner.py": "a round trip of the run's own settings, in memory",
    "kgcheck/providers/cache.py": "logprobs in the answer cache, a SQLite file kgcheck writes",
    "kgcheck/view/figures.py": "votes in the explorer's index, a SQLite file kgcheck writes",
    "retrievers/store.py": "queries in the corpus store, a SQLite file kgcheck writes",
}


def _json_load_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("load", "loads") and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "json"]


def test_json_is_read_through_the_one_loader() -> None:
    found = {}
    for folder in ("kgcheck", "retrievers", "evals", "graphs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if (lines := _json_load_calls(path)) and relative not in TRUSTED_JSON_CALLS:
                found[relative] = lines
    assert not found, ("read JSON with kgcheck.data.safe_json (parse, loads, load_file), "
                       f"which bounds depth, size and numbers: {found}")
    assert all(_json_load_calls(ROOT / name) for name in TRUSTED_JSON_CALLS)


def test_the_raw_line_sampler_reads_no_line_past_the_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kgcheck.data.record_lines import JsonLinesSampler

    path = tmp_path / "kg.jsonl"
    path.write_text("".join(f'{{"id": "f{n}", {FACT}}}\n' for n in range(3))
                    + f'{{"id": "g", {FACT}, "pad": "{"x" * 5000}"}}\n'
                    + f'{{"id": "h", {FACT}}}\n')
    monkeypatch.setenv(LINE_BYTES.env, "1000")
    for block_bytes in (64, 100, 2**20):  # the long line cut by a block, or inside one
        sampler = JsonLinesSampler(path, "kg", block_bytes=block_bytes)
        if block_bytes < 1000:
            with pytest.raises(TriplesError, match=r"kg\.jsonl, line 4: longer than 1,000"):
                sampler.count_records()
        else:  # a line inside a block costs no more than the block: its record is read
            assert sampler.count_records() == 5


def test_a_labels_file_refuses_a_weight_that_is_not_finite_and_a_long_stratum(
        tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("fact_id,label,weight\nf1,T,2.5\nf2,F,nan\n")
    with pytest.raises(LabelsError, match=r"labels\.csv, row 3: weight 'nan' is not a finite"):
        read_labels(path)
    path.write_text("fact_id,label,stratum\nf1,T,%s\n" % ("s" * 1001))
    with pytest.raises(LabelsError, match=r"row 2: the stratum is 1,001 characters long"):
        read_labels(path)
