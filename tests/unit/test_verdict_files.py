"""A sharded run folder (``shards/NNNNN.jsonl``) reads as its local twin (``verdicts.jsonl``).

Every reader takes a folder's verdicts from ``runfolder.verdict_files``: the same verdicts
split over shard files give the same report, export, estimate, explorer pages and review.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck import api
from kgcheck.cli import app
from kgcheck.data.runfolder import (
    RUN_INFO,
    SHARDS,
    SUMMARY,
    VERDICTS,
    VerdictsView,
    has_verdicts,
    read_verdict,
    read_verdicts,
    scan_folder,
    shard_verdicts_path,
    verdict_files,
    verdicts_stamp,
)
from kgcheck.view.explorer import FactQuery
from tests.support.stats_runs import make_replay_run

runner = CliRunner()


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A local run folder and the same verdicts as a sharded folder of three shards."""
    root = tmp_path_factory.mktemp("twins")
    local = make_replay_run(root / "local", "gemma2:9b", limit=60)
    sharded = root / "sharded"
    (sharded / SHARDS).mkdir(parents=True)
    for name in (RUN_INFO, SUMMARY):
        shutil.copy(local / name, sharded / name)
    lines = (local / VERDICTS).read_text().splitlines(keepends=True)
    # Uneven shards, one of them empty: a shard whose facts were all repeats of others.
    for index, part in enumerate((lines[:7], [], lines[7:])):
        shard_verdicts_path(sharded, index).write_text("".join(part))
    return local, sharded


def test_verdict_files_lists_the_shards_in_order(tmp_path: Path) -> None:
    (tmp_path / SHARDS).mkdir()
    for name in ("00010.jsonl", "00002.jsonl", "100000.jsonl", "00002.done", "plan.json"):
        (tmp_path / SHARDS / name).write_text("")
    assert [p.name for p in verdict_files(tmp_path)] == ["00002.jsonl", "00010.jsonl",
                                                         "100000.jsonl"]
    (tmp_path / VERDICTS).write_text("")
    assert verdict_files(tmp_path)[0] == tmp_path / VERDICTS
    assert verdict_files(tmp_path / "absent") == [] and not has_verdicts(tmp_path / "absent")


def test_the_readers_give_the_same_records(twins: tuple[Path, Path]) -> None:
    local, sharded = twins
    assert read_verdicts(sharded) == read_verdicts(local) == read_verdicts(local / VERDICTS)
    assert len(read_verdicts(sharded)) == 60
    assert list(VerdictsView(sharded)) == list(VerdictsView(local / VERDICTS))
    assert len(VerdictsView(sharded)) == 60
    fact_id = next(iter(read_verdicts(local)))
    assert read_verdict(sharded, fact_id) == read_verdict(local, fact_id)
    files = {path.name for path, _, _, _ in scan_folder(sharded)}
    assert files == {"00000.jsonl", "00002.jsonl"}
    size, _ = verdicts_stamp(sharded)
    assert size == (local / VERDICTS).stat().st_size


def test_a_bad_line_in_a_shard_is_reported_with_its_file(twins: tuple[Path, Path],
                                                         tmp_path: Path) -> None:
    _, sharded = twins
    copy = tmp_path / "copy"
    shutil.copytree(sharded, copy)
    with shard_verdicts_path(copy, 2).open("a") as fh:
        fh.write('{"fact_id": "x", "lab')
    heard: list[str] = []
    assert len(read_verdicts(copy, heard.append)) == 60
    assert heard == [f"{shard_verdicts_path(copy, 2)}: ignored 1 line(s) that are not "
                     "verdicts (line 54: incomplete or malformed JSON); those facts keep "
                     "their last good verdict or run again"]


def _invoke(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_report_export_and_estimate_agree(twins: tuple[Path, Path], tmp_path: Path) -> None:
    local, sharded = twins
    tables = {}
    for name, folder in (("local", local), ("sharded", sharded)):
        _invoke("report", str(folder), "--out", str(tmp_path / f"report-{name}"), "--no-plots")
        rows = json.loads((tmp_path / f"report-{name}" / "tables.json").read_text())
        # A row names its run by the folder's name; the rest must agree.
        tables[name] = [{k: v for k, v in row.items() if k != "source"} for row in rows]
        _invoke("export", str(folder), "--format", "csv", "--out", str(tmp_path / f"{name}.csv"))
    assert tables["local"] and tables["local"] == tables["sharded"]
    assert (tmp_path / "local.csv").read_bytes() == (tmp_path / "sharded.csv").read_bytes()
    estimates = {}
    for name, folder in (("local", local), ("sharded", sharded)):
        copy = tmp_path / f"estimate-{name}"
        shutil.copytree(folder, copy)
        _invoke("estimate", str(copy), "--gold-sample", "20", "--seed", "3", "--no-plots")
        estimates[name] = json.loads((copy / "estimate.json").read_text())
    for found in estimates.values():
        found.pop("run", None)
    assert estimates["local"] == estimates["sharded"]


def test_the_explorer_reads_a_fact_back_from_its_shard(twins: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    local, sharded = twins
    copies = []
    for folder in (local, sharded):
        copies.append(tmp_path / folder.name)
        shutil.copytree(folder, copies[-1])
    explorer = api.open_explorer(copies)
    try:
        records = list(read_verdicts(local).values())
        for record in (records[0], records[30], records[-1]):
            assert explorer.record(1, record["fact_id"]) == explorer.record(
                0, record["fact_id"]) == record
        pages = [explorer.facts(FactQuery(run=n, size=100)) for n in (0, 1)]
        assert pages[0]["total"] == pages[1]["total"] == 60
        assert pages[0]["rows"] == pages[1]["rows"]
    finally:
        explorer.close()
