"""Sweeps: a grid of cells, each a resumable run; checked before running; a leaderboard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kgcheck
from kgcheck.cli import app
from kgcheck.runs.grid import SweepConfigError, load_sweep

GRID = """
out = "{out}"
parallel = 2
concurrency = 4
limit = 30

[grid]
strategies = ["dka", "giv-z"]
models = ["replay:gemma2:9b", "replay:mistral:7b"]
datasets = ["yago"]

[grid.prompts]
dka = ["default", "my-dka.txt"]
giv-z = ["default", "my-giv.txt"]
"""


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    (tmp_path / "my-dka.txt").write_text(
        "Is this true? Reply T or F only.\n{kg_note}\nFact: {subject} | {predicate} | {object}",
        encoding="utf-8")
    giv = (Path(__file__).parents[2] / "prompts" / "giv-z.txt").read_text(encoding="utf-8")
    (tmp_path / "my-giv.txt").write_text("Be careful.\n" + giv, encoding="utf-8")
    path = tmp_path / "sweep.toml"
    path.write_text(GRID.format(out=tmp_path / "out"), encoding="utf-8")
    return path


def test_two_prompts_two_models_two_strategies_make_a_leaderboard(sweep_file: Path) -> None:
    result = kgcheck.sweep(sweep_file)
    assert len(result.rows) == 8 and not result.failed
    out = sweep_file.parent / "out"
    cells = sorted(p.name for p in (out / "cells").iterdir())
    assert len(cells) == 8
    board = json.loads((out / "leaderboard.json").read_text())
    assert [r["macro_f1"] for r in board] == sorted((r["macro_f1"] for r in board),
                                                    reverse=True)
    for row in board:
        summary = json.loads((out / "cells" / row["cell"] / "summary.json").read_text())
        assert row["n"] == summary["n"] == 30
        assert row["f1_true"] == summary["f1_true"]
        assert 0 <= row["accuracy"] <= 1 and row["na_rate"] is not None
    # Replay does not read prompts: a prompt's cell scores as its default's does.
    by_cell = {(r["strategy"], r["model"], Path(r["prompt"]).name): r for r in board}
    assert by_cell[("dka", "replay:gemma2:9b", "default")]["f1_true"] == \
        by_cell[("dka", "replay:gemma2:9b", "my-dka.txt")]["f1_true"]
    tables = (out / "tables.md").read_text()
    assert tables.count("| replay:") == 8
    assert (out / "leaderboard.png").is_file() and (out / "leaderboard.svg").is_file()


def test_a_second_sweep_resumes_every_cell_without_running_again(sweep_file: Path) -> None:
    kgcheck.sweep(sweep_file)
    again = kgcheck.sweep(sweep_file)
    assert not again.failed
    assert all(r["n"] == 30 for r in again.rows)


@pytest.mark.parametrize(("text", "message"), [
    ('[grid]\nstrategies=["dka"]\nmodels=["replay:gemma2:9b"]\ndatasets=["yago"]\nbogus=1\n',
     "unknown key grid.bogus"),
    ('colour = 1\n[grid]\nstrategies=["dka"]\nmodels=["replay:gemma2:9b"]\n',
     "unknown key colour"),
    ('[grid]\nstrategies=["dka"]\nmodels=["replay:gemma2:9b"]\n', "needs datasets or triples"),
    ('[grid]\nmodels=["replay:gemma2:9b"]\ndatasets=["yago"]\n', "grid.strategies is missing"),
    ('parallel = 0\n[grid]\nstrategies=["dka"]\nmodels=["m:x"]\ndatasets=["yago"]\n',
     "parallel must be a whole number"),
    ('[grid\n', "not valid TOML"),
])
def test_malformed_sweep_files_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SweepConfigError, match=message):
        load_sweep(path)


@pytest.mark.parametrize(("grid", "message"), [
    ('strategies=["dka", "nope"]\nmodels=["replay:gemma2:9b"]\ndatasets=["yago"]',
     "cell .*nope.*unknown strategy"),
    ('strategies=["dka"]\nmodels=["nosuch:model"]\ndatasets=["yago"]',
     "unknown model provider 'nosuch'"),
    ('strategies=["dka"]\nmodels=["replay:gemma2:9b"]\ndatasets=["atlantis"]', "atlantis"),
    ('strategies=["dka"]\nmodels=["replay:gemma2:9b"]\ndatasets=["yago"]\n'
     '[grid.settings]\nwarp_factor=[9]', "no setting warp_factor"),
    ('strategies=["dka"]\nmodels=["replay:gemma2:9b"]\ndatasets=["yago"]\n'
     'prompts=["missing-prompt.txt"]', "missing-prompt.txt"),
])
def test_unknown_names_fail_before_any_cell_runs(tmp_path: Path, grid: str,
                                                 message: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(f'out = "{tmp_path / "out"}"\n[grid]\n{grid}\n', encoding="utf-8")
    with pytest.raises(SweepConfigError, match=message):
        kgcheck.sweep(path)
    assert not (tmp_path / "out").exists(), "a cell ran before the sweep was checked"


def test_yaml_sweeps_and_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"out: {tmp_path / 'out'}\nlimit: 10\ngrid:\n  strategies: [dka]\n"
                    "  models: [replay:gemma2:9b, replay:qwen2.5:7b]\n  datasets: [factbench]\n",
                    encoding="utf-8")
    cli = CliRunner()
    checked = cli.invoke(app, ["sweep", str(path), "--check"])
    assert checked.exit_code == 0, checked.output
    assert "2 cells checked" in checked.output and not (tmp_path / "out" / "cells").exists()
    ran = cli.invoke(app, ["sweep", str(path), "--no-plots"])
    assert ran.exit_code == 0, ran.output
    assert "leaderboard" in ran.output
    board = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    assert {r["model"] for r in board} == {"replay:gemma2:9b", "replay:qwen2.5:7b"}
    bad = cli.invoke(app, ["sweep", str(tmp_path / "absent.toml")])
    assert bad.exit_code == 2 and "sweep file not found" in bad.output


def test_the_leaderboard_is_rebuilt_from_the_cells(sweep_file: Path) -> None:
    kgcheck.sweep(sweep_file, plots=False)
    rebuilt = kgcheck.leaderboard(sweep_file.parent / "out", plots=False)
    assert len(rebuilt.rows) == 8
    with pytest.raises(SweepConfigError, match="not a sweep folder"):
        kgcheck.leaderboard(sweep_file.parent)
