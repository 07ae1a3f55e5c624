"""Significance groups: Holm-corrected McNemar tests against statsmodels, letters, sweeps."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

import kgcheck
from kgcheck.evals.stats.groups import letters, significance_groups

GRID = """
out = "{out}"
parallel = 2
concurrency = 4
limit = 40

[grid]
strategies = ["dka"]
models = ["replay:gemma2:9b", "replay:mistral:7b"]
datasets = ["factbench"]

[grid.prompts]
dka = ["default", "my-dka.txt"]
"""


def _system(rng: np.random.Generator, gold: dict[str, str], skill: float
            ) -> dict[str, str]:
    flip = {"T": "F", "F": "T"}
    return {f: g if rng.random() < skill else flip[g] for f, g in gold.items()}


def test_holm_corrected_p_values_equal_statsmodels() -> None:
    rng = np.random.default_rng(4)
    gold = {str(i): str(rng.choice(["T", "F"])) for i in range(300)}
    systems = [(f"s{k}", gold, _system(rng, gold, skill))
               for k, skill in enumerate((0.9, 0.88, 0.75, 0.74, 0.6))]
    groups = significance_groups(systems)
    raw = []
    for (_, _, a), (_, _, b) in combinations(systems, 2):
        right_a = [a[f] == gold[f] for f in gold]
        right_b = [b[f] == gold[f] for f in gold]
        table = [[sum(x and y for x, y in zip(right_a, right_b, strict=True)),
                  sum(x and not y for x, y in zip(right_a, right_b, strict=True))],
                 [sum(y and not x for x, y in zip(right_a, right_b, strict=True)),
                  sum(not x and not y for x, y in zip(right_a, right_b, strict=True))]]
        raw.append(mcnemar(table, exact=True).pvalue)
    reject, holm, _, _ = multipletests(raw, alpha=0.05, method="holm")
    assert [p.p_value for p in groups.pairs] == pytest.approx(raw, rel=1e-12)
    assert [p.p_holm for p in groups.pairs] == pytest.approx(list(holm), rel=1e-12)
    assert [p.different for p in groups.pairs] == list(reject)
    # 0.90 vs 0.88 and 0.75 vs 0.74 cannot be told apart on 300 facts; 0.9 vs 0.6 can.
    assert set(groups.letters["s0"]) & set(groups.letters["s1"])
    assert set(groups.letters["s2"]) & set(groups.letters["s3"])
    assert not set(groups.letters["s0"]) & set(groups.letters["s4"])


def test_letters_span_the_runs_of_systems_that_do_not_differ() -> None:
    order = ["a", "b", "c", "d"]
    differ = {frozenset(p): False for p in combinations(order, 2)}
    assert letters(order, differ) == {"a": "a", "b": "a", "c": "a", "d": "a"}
    differ[frozenset(("a", "c"))] = differ[frozenset(("a", "d"))] = True
    differ[frozenset(("b", "d"))] = True
    assert letters(order, differ) == {"a": "a", "b": "ab", "c": "bc", "d": "c"}
    assert letters(order, {}) == {"a": "a", "b": "b", "c": "c", "d": "d"}


def test_systems_without_shared_facts_are_not_tested() -> None:
    gold_a, gold_b = {"1": "T", "2": "F"}, {"3": "T"}
    groups = significance_groups([("x", gold_a, {"1": "T", "2": "F"}),
                                  ("y", gold_b, {"3": "T"})])
    assert groups.pairs[0].p_value is None and groups.pairs[0].different
    assert groups.letters == {"x": "a", "y": "b"}


def test_a_sweeps_leaderboard_shows_significance_groups(tmp_path: Path) -> None:
    # Replay does not read prompts: the two gemma cells answer alike and must share a group.
    (tmp_path / "my-dka.txt").write_text(
        "Is this true? Reply T or F only.\n{kg_note}\nFact: {subject} | {predicate} | {object}",
        encoding="utf-8")
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(GRID.format(out=tmp_path / "out"), encoding="utf-8")
    result = kgcheck.sweep(sweep_file, plots=False)
    board = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    assert [r["group"] for r in board] == [r["group"] for r in result.rows]
    gemma = [r["group"] for r in board if r["model"] == "replay:gemma2:9b"]
    assert len(gemma) == 2 and gemma[0] == gemma[1] and gemma[0]
    assert all(r["group"] for r in board)
    tables = (tmp_path / "out" / "tables.md").read_text()
    assert "| # | group | cell |" in tables and "not significantly different" in tables
    rebuilt = kgcheck.leaderboard(tmp_path / "out", plots=False)
    assert [r["group"] for r in rebuilt.rows] == [r["group"] for r in board]


def test_kgcheck_report_groups_runs_that_do_not_differ(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kgcheck.cli import app
    from tests.support.stats_runs import make_replay_run

    runs = [make_replay_run(tmp_path / "gemma", "gemma2:9b", limit=60),
            make_replay_run(tmp_path / "gemma-again", "gemma2:9b", limit=60),
            make_replay_run(tmp_path / "qwen", "qwen2.5:7b", limit=60)]
    result = CliRunner().invoke(app, ["report", *map(str, runs), "--out",
                                      str(tmp_path / "report"), "--no-plots"])
    assert result.exit_code == 0, result.output
    tables = (tmp_path / "report" / "tables.md").read_text()
    section = tables.split("## Significance groups")[1].split("\n## ")[0]
    rows = {line.split(" | ")[2]: line.split(" | ")[1] for line in section.splitlines()
            if line.startswith("| ") and line.split(" | ")[2] in ("gemma", "gemma-again", "qwen")}
    assert rows["gemma"] == rows["gemma-again"]
    assert "| gemma | gemma-again | 60 | 0 | 0 | 1 | 1 |" in section
