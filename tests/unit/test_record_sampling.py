"""Samples of JSON Lines, CSV and TSV drawn over raw lines: the streaming reader's sample, cheaper."""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import tempfile
from array import array
from collections import Counter
from pathlib import Path

import pytest
from scipy.stats import chisquare
from typer.testing import CliRunner

import kgcheck
import kgcheck.data.hash_spill as hash_spill
import kgcheck.data.record_lines as record_lines
from kgcheck.cli import app
from kgcheck.data.block_arrays import span_hashes
from kgcheck.data.record_lines import JsonLinesSampler, RecordSampler, TableSampler, record_source
from kgcheck.data.sampling import largest_remainder, select_facts
from kgcheck.data.sources import TriplesError
from kgcheck.data.triples import iter_triples

runner = CliRunner()
LABELS = ["T", "F", "true", "0", "idk", None, "", "yes"]


def _jsonl(path: Path, n: int = 400, ids: str = "strings", odd: bool = True) -> Path:
    """Write facts with labels, blank lines of several kinds and, with ``odd``, lines the
    byte searches cannot read (escapes, nested objects, integer ids, spaces)."""
    rng = random.Random(1)
    lines = []
    for i in range(n):
        row: dict = {"subject": f"http://e.org/s{i % 37}", "predicate": f"p{rng.randrange(6)}",
                     "object": f"object {i}"}
        if ids == "strings":
            row = {"id": f"f{i}", **row}
        elif ids == "integers":
            row = {"id": i + 1000, **row}
        if (label := LABELS[i % len(LABELS)]) is not None:
            row["label"] = label
        text = json.dumps(row)
        if odd and i % 9 == 0:
            row["object"] = f'says "é" {i}'  # \" and \u00e9 escapes
            row["meta"] = {"id": "nested", "predicate": "not this one"}
            text = json.dumps(row)
        if odd and i % 13 == 0:
            text = text.replace('": ', '" :  ').replace(", ", ",")  # other spacing
        if odd and i % 17 == 0:
            text = "  " + text  # indented
        if odd and i % 19 == 0:
            text = text.replace(f'"object {i}"', '"predicate"')  # a key's name as a value
        if odd and i % 23 == 0:
            text = text[:-1] + ', "predicate": "given twice", "label": 1}'  # JSON keeps the last
        lines.append(text)
        if i % 11 == 0:
            lines.append(["", "   ", "\r", "\u3000\u00a0", "\t"][i % 5])
    data = ("\r\n" if odd else "\n").join(lines).encode()
    path.write_bytes((b"\xef\xbb\xbf" if odd else b"") + data + (b"" if odd else b"\n"))
    return path


def _table(path: Path, n: int = 400, ids: bool = True, odd: bool = True,
           delimiter: str = ",") -> Path:
    """Write a table with a label column, quoted fields, blank rows and, with ``odd``, a
    header in capitals, CRLF line ends, short rows and rows of quotes and blanks."""
    rng = random.Random(2)
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\r\n" if odd else "\n")
    # The odd table has its id last, after a quoted column: a short row has no id cell.
    header = ["ID"] * (ids and not odd) + [" Subject", "predicate", "object", "label"]
    header += ["ID"] * (ids and odd)
    writer.writerow(header if odd else [h.strip().lower() for h in header])
    for i in range(n):
        obj = f"object {i}" if i % 3 else f'an object, "quoted" {i}'
        row = [f"s{i % 41}", f"p{rng.randrange(5)}", obj, LABELS[i % len(LABELS)] or ""]
        writer.writerow([f" f{i} "] * (ids and not odd) + row + [f" f{i} "] * (ids and odd))
        if odd and i % 10 == 0:
            out.write(["", delimiter * 3, '"  "' + delimiter, " \t "][i % 4] + "\r\n")
    if odd:
        out.write(delimiter.join(["s1", "p1", "a short row"]) + "\r\n")
    path.write_bytes(("\ufeff" if odd else "").encode() + out.getvalue().encode())
    return path


def _both(path: Path, seed: int, block: int = 1 << 20, **kwargs):
    streamed = select_facts(lambda: iter_triples(path, "kg"), seed=seed, **kwargs)
    sampler = record_source(path, "kg")
    assert isinstance(sampler, RecordSampler)
    sampler.block_bytes = block
    return streamed, select_facts(sampler, seed=seed, **kwargs), sampler


def _dump(selection):
    return [f.model_dump() for f in selection.facts]


FILES = {"kg.jsonl": _jsonl, "kg.csv": _table,
         "kg.tsv": lambda p, **k: _table(p, delimiter="\t", **k)}


def test_each_format_gets_its_sampler(tmp_path) -> None:
    for name, kind in [("kg.jsonl", JsonLinesSampler), ("kg.ndjson", JsonLinesSampler),
                       ("kg.csv", TableSampler), ("kg.tsv.gz", TableSampler),
                       ("kg.JSONL.gz", JsonLinesSampler)]:
        assert type(record_source(tmp_path / name, "kg")) is kind
    assert not isinstance(record_source(tmp_path / "kg.txt", "kg"), RecordSampler)


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("kwargs", [{"sample": 40}, {"sample": 5000}, {"sample": 25, "limit": 7},
                                    {"sample": 30, "stratify": "predicate"},
                                    {"per_stratum": 2, "stratify": "subject"},
                                    {"sample": 12, "stratify": "label"},
                                    {"per_stratum": 3, "stratify": "dataset"}])
def test_the_sample_over_lines_is_the_sample_over_facts(tmp_path, name: str, kwargs: dict) -> None:
    path = FILES[name](tmp_path / name)
    for seed in range(3):
        for block in (64, 1000, 1 << 20):
            streamed, raw, sampler = _both(path, seed, block, **kwargs)
            assert _dump(raw) == _dump(streamed)
            assert raw.seen == streamed.seen and raw.notes == streamed.notes
            assert not sampler.spanning
    assert any(f.label is not None for f in raw.facts)


@pytest.mark.parametrize("name, make", [("kg.jsonl", lambda p: _jsonl(p, ids="none")),
                                        ("kg.jsonl", lambda p: _jsonl(p, ids="integers")),
                                        ("kg.jsonl", lambda p: _jsonl(p, odd=False)),
                                        ("kg.csv", lambda p: _table(p, ids=False)),
                                        ("kg.csv", lambda p: _table(p, odd=False))])
def test_ids_given_or_numbered_plain_or_odd(tmp_path, name: str, make) -> None:
    path = make(tmp_path / name)
    for seed in range(4):
        for kwargs in ({"sample": 33}, {"sample": 20, "stratify": "predicate"}):
            streamed, raw, _ = _both(path, seed, 700, **kwargs)
            assert _dump(raw) == _dump(streamed) and raw.seen == streamed.seen


def test_a_blank_first_line_after_a_byte_order_mark_is_skipped(tmp_path) -> None:
    path = tmp_path / "kg.jsonl"
    path.write_bytes(b"\xef\xbb\xbf\n" + _jsonl(tmp_path / "body.jsonl", 30, odd=False).read_bytes())
    streamed, raw, _ = _both(path, 0, sample=40)
    assert _dump(raw) == _dump(streamed) and raw.seen == 30


def test_plain_files_are_read_by_byte_searches_alone(tmp_path, monkeypatch) -> None:
    decoded: list[int] = []
    for cls in (JsonLinesSampler, TableSampler):
        for method in ("_row", "_fields"):
            if hasattr(cls, method):
                real = getattr(cls, method)
                monkeypatch.setattr(cls, method, lambda self, number, line, real=real:
                                    decoded.append(number) or real(self, number, line))
    for path in (_jsonl(tmp_path / "kg.jsonl", odd=False), _jsonl(tmp_path / "n.jsonl", ids="integers", odd=False),
                 _table(tmp_path / "kg.csv", odd=False), _table(tmp_path / "kg.tsv", odd=False, delimiter="\t")):
        decoded.clear()
        sampler = record_source(path, "kg")
        assert isinstance(sampler, RecordSampler)
        assert sampler.count_records() == 400
        # Only a table's header and its rows holding a quote are parsed to be counted.
        assert decoded == [] if path.suffix == ".jsonl" else decoded == [1]


def _outcome(stream, **kwargs):
    """Return what a selection gives: its facts, or its error's message."""
    try:
        return _dump(select_facts(stream, **kwargs))
    except TriplesError as exc:
        return str(exc)


@pytest.mark.parametrize("text, message", [
    ('{"id": "a", "subject": "s", "predicate": "p", "object": "o"}\n' * 2, "'a' appears more than once (facts 1 and 2)"),
    ('{"id": 7, "subject": "s", "predicate": "p", "object": "o"}\n\n{"id": " 7", "subject": "s", "predicate": "p", "object": "o"}\n',
     "'7' appears more than once (facts 1 and 2)"),
    # The second line is numbered 2, as the third line says explicitly.
    ('{"subject": "s", "predicate": "p", "object": "o"}\n' * 2 + '{"id": "2", "subject": "s", "predicate": "p", "object": "o"}\n',
     "'2' appears more than once (facts 2 and 3)"),
    ('{"id": "x", "subject": "s", "predicate": "p", "object": "o", "id": "b"}\n{"id": "b", "subject": "s", "predicate": "p", "object": "o"}\n',
     "'b' appears more than once (facts 1 and 2)"),
    ('{"id": "\\u0061", "subject": "s", "predicate": "p", "object": "o"}\n{"id": "a", "subject": "s", "predicate": "p", "object": "o"}\n',
     "'a' appears more than once (facts 1 and 2)"),
    # A key named '"id' is no id: these facts are numbered.
    ('{"\\"id": "k", "subject": "s", "predicate": "p", "object": "o"}\n' * 2, None),
    ('{"\\"id": "k", "subject": "s", "predicate": "p", "object": "o"}\n{"id": "1", "subject": "s", "predicate": "p", "object": "o"}\n',
     "'1' appears more than once (facts 1 and 2)"),
])
def test_a_repeated_json_id_is_refused_as_the_streaming_reader_does(tmp_path, text: str, message: str) -> None:
    lines = [f'{{"id": "u{i}", "subject": "s", "predicate": "p", "object": "o"}}\n' for i in range(30)]
    path = tmp_path / "kg.jsonl"
    for body in (text, text + "".join(lines), "".join(lines) + text):
        path.write_text(body)
        streamed = _outcome(lambda: iter_triples(path, "kg"), sample=3)
        for kwargs in ({"sample": 3}, {"sample": 3, "stratify": "predicate"}):
            assert _outcome(JsonLinesSampler(path, "kg", block_bytes=100), **kwargs) == streamed
        if body is text:
            assert (message in streamed) if message else isinstance(streamed, list)


def test_a_repeated_table_id_is_refused_as_the_streaming_reader_does(tmp_path) -> None:
    path = tmp_path / "kg.csv"
    for header, rows, message in [
            ("id,subject,predicate,object", ["a,s,p,o", "b,s,p,o", " a ,s,p,o"], "'a' appears more than once (facts 1 and 3)"),
            ("id,subject,predicate,object", ['"b",s,p,o', "", "b,s,p,o"], "'b' appears more than once (facts 1 and 2)"),
            # A row without its id cell is numbered: the second fact is 2.
            ("subject,predicate,object,id", ["s,p,o,x", "s,p,o", ",,", "s,p,o,2"], "'2' appears more than once (facts 2 and 3)"),
            ("subject,predicate,object,id", ["s,p,o,x", "s,p,o", ",,", "s,p,o,3"], None)]:
        path.write_text(header + "\n" + "\n".join(rows) + "\n")
        streamed = _outcome(lambda: iter_triples(path, "kg"), sample=2)
        for kwargs in ({"sample": 2}, {"sample": 2, "stratify": "subject"}):
            assert _outcome(TableSampler(path, "kg", ",", block_bytes=20), **kwargs) == streamed
        assert (message in streamed) if message else isinstance(streamed, list)


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_repeated_id_past_the_memory_cap_is_refused_and_the_spill_removed(
        tmp_path, monkeypatch, name: str) -> None:
    # 400 ids over a cap of 16 hashes: they spill to disk, and the repeat is in another
    # block and another spill than its first occurrence.
    spills = tmp_path / "tmp"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    monkeypatch.setattr(hash_spill, "MEMORY_HASHES", 16)
    made: list[str] = []
    real = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: made.append(real(**kw)) or made[-1])
    plain = FILES[name](tmp_path / f"plain.{name}", odd=False)
    path = tmp_path / name
    lines = plain.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:3], *lines[4:-1], lines[2], lines[-1]]))
    streamed = _outcome(lambda: iter_triples(path, "kg"), sample=5)
    assert "'f1' appears more than once" in streamed
    for kwargs in ({"sample": 5}, {"sample": 5, "stratify": "predicate"}):
        for sampler in (record_source(path, "kg"), record_source(plain, "kg")):
            sampler.block_bytes = 2000
            expected = streamed if sampler.path == path else _outcome(
                lambda: iter_triples(plain, "kg"), **kwargs)
            assert _outcome(sampler, **kwargs) == expected
    assert made, "the ids spilled"
    assert not list(spills.iterdir()), "and the spill is gone"


def test_reproducible_by_seed_and_only_the_chosen_records_built(tmp_path, monkeypatch) -> None:
    built: list[int] = []
    real_json, real_table = record_lines.jsonl_facts, record_lines.table_fact
    monkeypatch.setattr(record_lines, "jsonl_facts", lambda *a, **k: built.append(1) or real_json(*a, **k))
    monkeypatch.setattr(record_lines, "table_fact", lambda *a, **k: built.append(1) or real_table(*a, **k))
    for path in (_jsonl(tmp_path / "kg.jsonl"), _table(tmp_path / "kg.csv")):
        built.clear()
        first = kgcheck.select_facts(path, sample=25, seed=3)
        assert [f.id for f in first] == [f.id for f in kgcheck.select_facts(path, sample=25, seed=3)]
        assert [f.id for f in first] != [f.id for f in kgcheck.select_facts(path, sample=25, seed=4)]
        assert len(built) == 3 * 25


@pytest.mark.parametrize("name", ["kg.jsonl", "kg.csv"])
def test_the_record_sample_is_uniform(tmp_path, name: str) -> None:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("".join(json.dumps({"subject": f"s{i}", "predicate": "p", "object": "o"}) + "\n\n"
                                for i in range(20)))
    else:
        path.write_text("subject,predicate,object\n" + "".join(f"s{i},p,o\n,,\n" for i in range(20)))
    hits = Counter(f.subject for seed in range(600)
                   for f in select_facts(record_source(path, "kg"), sample=5, seed=seed).facts)
    assert len(hits) == 20 and sum(hits.values()) == 600 * 5
    # Each of 20 facts is in a sample of 5 with probability 1/4: expected 150 times each.
    assert chisquare(list(hits.values())).pvalue > 0.001
    # The test can fail: the first five lines every time are far from uniform.
    assert chisquare([600] * 5 + [1] * 15).pvalue < 1e-6


@pytest.mark.parametrize("name", ["kg.jsonl", "kg.csv"])
def test_stratified_shares_follow_the_predicates(tmp_path, name: str) -> None:
    sizes = {"a": 300, "b": 120, "c": 60, "d": 20}
    rows = [(f"s{i}", p, str(i)) for p, n in sizes.items() for i in range(n)]
    random.Random(0).shuffle(rows)
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(dict(zip(("subject", "predicate", "object"), r, strict=True))) + "\n" for r in rows))
    else:
        path.write_text("subject,predicate,object\n" + "".join(",".join(r) + "\n" for r in rows))
    chosen = select_facts(record_source(path, "kg"), sample=50, seed=2, stratify="predicate").facts
    assert Counter(f.predicate for f in chosen) == largest_remainder(sizes, 50) == {"a": 30, "b": 12, "c": 6, "d": 2}
    each = select_facts(record_source(path, "kg"), per_stratum=4, seed=2, stratify="predicate").facts
    assert Counter(f.predicate for f in each) == dict.fromkeys(sizes, 4)


def test_gzipped_files_are_sampled_over_lines(tmp_path) -> None:
    for name, make in [("kg.jsonl", _jsonl), ("kg.csv", _table)]:
        plain = make(tmp_path / name)
        packed = tmp_path / (name + ".gz")
        packed.write_bytes(gzip.compress(plain.read_bytes()))
        for kwargs in ({"sample": 30}, {"sample": 30, "stratify": "predicate"}):
            streamed, raw, sampler = _both(packed, 5, 999, **kwargs)
            assert isinstance(sampler, RecordSampler) and _dump(raw) == _dump(streamed)
            assert [f.id for f in raw.facts] == [f.id for f in _both(plain, 5, **kwargs)[1].facts]


def test_a_quoted_line_break_falls_back_to_the_full_parse(tmp_path) -> None:
    path = tmp_path / "kg.csv"
    rows = [f"s{i},p,o{i}" for i in range(50)]
    rows[30] = 's30,p,"an object\nover two lines"'
    path.write_text("subject,predicate,object\n" + "\n".join(rows) + "\n")
    for kwargs in ({"sample": 50}, {"sample": 10, "stratify": "predicate"}):
        streamed, raw, sampler = _both(path, 1, 64, **kwargs)
        assert sampler.spanning and _dump(raw) == _dump(streamed)
    assert "an object\nover two lines" in {f.object for f in raw.facts} | {
        f.object for f in select_facts(record_source(path, "kg"), sample=50).facts}
    # A quote that opens no field (csv reads it as a character) keeps the line sampling.
    path.write_text('subject,predicate,object\ns1,p,say "hi\ns2,p,"x""y",\ns3,p,"a" b\n')
    streamed, raw, sampler = _both(path, 0, sample=5)
    assert not sampler.spanning and _dump(raw) == _dump(streamed) and raw.seen == 3


def test_a_malformed_chosen_record_names_file_and_line(tmp_path, scripted) -> None:
    good = '{"subject": "s", "predicate": "p", "object": "o"}\n'
    cases = [("kg.jsonl", good + "\n" + '{"subject": "s", "predicate": \n', r"kg\.jsonl, line 3: malformed JSON"),
             ("kg.jsonl", good + '["s", "p", "o"]\n', r"kg\.jsonl, line 2: expected a JSON object"),
             ("kg.jsonl", good + '{"subject": "s", "object": "o"}\n', r"kg\.jsonl, line 2: missing predicate"),
             ("kg.jsonl", good + '{"subject": "s", "predicate": "p", "object": "\xe9"}\n', r"kg\.jsonl, line 2: not UTF-8"),
             ("kg.jsonl", good + good.replace("o", "\x00"), r"kg\.jsonl, line 2: holds NUL bytes"),
             ("kg.csv", "subject,predicate,object\ns,p,o\n\ns,p,o,extra\n", r"kg\.csv, row 4: 4 fields but the header has 3"),
             ("kg.csv", "subject,predicate,object\ns,p,o\ns,,o\n", r"kg\.csv, row 3: missing predicate"),
             ("kg.tsv", "subject\tpredicate\tobject\tlabel\ns\tp\to\tmaybe\n", r"kg\.tsv, row 2: .*maybe")]
    for name, text, message in cases:
        path = tmp_path / name
        path.write_bytes(text.encode("latin-1"))
        with pytest.raises(TriplesError, match=message):
            list(iter_triples(path))  # the streaming reader's message ...
        with pytest.raises(TriplesError, match=message):
            kgcheck.select_facts(path, sample=5)  # ... is the sample's
    path = tmp_path / "kg.jsonl"
    path.write_text(good + "\n" + '{"subject": "s", "predicate": \n')
    result = runner.invoke(app, ["run", "--triples", str(path), "--sample", "5", "--model",
                                 scripted("bad-record", ["T"]), "--out", str(tmp_path / "r"), "--no-progress"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    message = " ".join(result.output.split())
    assert "kg.jsonl, line 3: malformed JSON" in message


def test_a_stratum_read_from_an_unchosen_record_reports_its_error(tmp_path) -> None:
    path = tmp_path / "kg.jsonl"
    path.write_text('{"subject": "s", "predicate": "p", "object": "o"}\n' * 20
                    + '{"subject": "s", "object": "o"}\n')
    for stream in (lambda: iter_triples(path, "kg"), record_source(path, "kg")):
        with pytest.raises(TriplesError, match=r"line 21: missing predicate"):
            select_facts(stream, sample=2, stratify="predicate")


# Cells for random rows: mostly plain (some quoted, holding a separator), else empty, blank,
# padded, non-ASCII, control bytes, doubled or stray quotes and carriage returns.
PLAIN = [b"f1", b"f2", b"x y", b"a\xc3\xa9"]
QUOTED = [b'"q"', b'"q,r"', b'"q\tr"']
ODD = [b"", b" ", b" f3 ", b'""', b'"a""b"', b'a"b', b'"a"b', b"\xc3\xa9t", b"\x80", b"\x1c", b"\t",
       b"a\rb", b"\r", b'"', b"z\x0b", b'"\r"']


def _random_block(rng: random.Random, separator: bytes) -> bytes:
    lines = [separator.join(rng.choice(rng.choices([PLAIN, QUOTED, ODD], [80, 14, 6])[0])
                            for _ in range(rng.choice([1, 2, 3, 4, 4, 4, 4, 5])))
             + rng.choice([b"", b"", b"\r"]) for _ in range(rng.randrange(1, 7))]
    block = b"\n".join(lines) + rng.choice([b"\n", b"\n", b""])
    return block or b"\n"  # (a file's blocks are never empty)


@pytest.mark.parametrize("delimiter, header", [(",", "id,subject,predicate,object"),
                                               (",", "subject,predicate,id,object"),
                                               ("\t", "subject\tid\tpredicate\tobject")])
def test_the_block_arrays_read_a_block_as_the_line_searches_do(tmp_path, delimiter: str,
                                                               header: str) -> None:
    path = tmp_path / ("kg.csv" if delimiter == "," else "kg.tsv")
    path.write_text(header + "\n")
    sampler = TableSampler(path, "kg", delimiter)
    assert sampler._start()
    rng = random.Random(header)
    paired = spans = 0
    for _ in range(6000):
        block = _random_block(rng, delimiter.encode())
        if sampler._quotes_pair_up(block):
            paired += 1
            assert sampler._rows_matched(block), block
        lines = sampler._line_count(block)
        assert lines == block.count(b"\n") + (not block.endswith(b"\n"))
        for number in (0, 10):
            assert sampler._blank_lines(block, number) == sampler._searched_blank_lines(block, number)
        if (cells := sampler._id_cell_spans(block)) is not None:
            spans += 1
            searched = sampler._searched_ids(block, lines, array("I"))
            assert searched is not None and searched.tolist() == span_hashes(block, *cells).tolist(), block
    # Both ways are taken often: the test compares them.
    assert 500 < paired < 5500 and 300 < spans < 5500, (paired, spans)
