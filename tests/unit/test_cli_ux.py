"""What a new user sees: 80 columns, --version, help texts, settings, .env, consensus output."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.cli.app import every_command
from kgcheck.cli.commands.run import print_summary
from kgcheck.runs import runner as run_module
from tests.unit.test_consensus_run import FACTS, MEMBERS, panel, run  # noqa: F401 - fixture

cli = CliRunner()
WIDTH = 80


def _narrow(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """Send the CLI's console to an 80-column buffer."""
    buffer = io.StringIO()
    monkeypatch.setattr("kgcheck.cli.commands.run.console", Console(file=buffer, width=WIDTH))
    return buffer


def test_version_prints_the_installed_version() -> None:
    result = cli.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("kgcheck ") and result.output.split()[1][0].isdigit()


def _commands(group: typer.core.TyperGroup, prefix: list[str]) -> list[list[str]]:
    found = []
    for name, command in group.commands.items():
        found.append([*prefix, name])
        if isinstance(command, typer.core.TyperGroup):
            found += _commands(command, [*prefix, name])
    return found


def test_no_help_text_shows_python_types_or_braces() -> None:
    commands = _commands(every_command(), [])
    assert ["report"] in commands and ["graph", "draw"] in commands and ["settings"] in commands
    for words in [[], *commands]:
        result = cli.invoke(app, [*words, "--help"], env={"COLUMNS": str(WIDTH)})
        assert result.exit_code == 0, (words, result.output)
        for bad in ("{", "<list[", "list[str]", "list[Path]"):
            assert bad not in result.output, (words, bad, result.output)


def test_settings_lists_a_strategys_keys_with_type_default_and_description() -> None:
    result = cli.invoke(app, ["settings", "giv-z"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if " max_attempts " in line)
    assert " int " in row and " 3 " in row and "attempt" in row.lower()
    assert "kgcheck settings STRATEGY" in " ".join(
        cli.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output.split())
    bad = cli.invoke(app, ["settings", "nope"])
    assert bad.exit_code == 2 and "unknown strategy 'nope'" in bad.output


def test_corpus_list_with_nothing_imported_says_so(tmp_path: Path) -> None:
    result = cli.invoke(app, ["corpus", "list", "--store", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "no corpus imported" in said and "kgcheck corpus import" in said
    assert not (tmp_path / "none.sqlite").exists()


def test_the_cli_reads_dotenv_without_overriding(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("KGCHECK_TEST_FROM_DOTENV=yes\nKGCHECK_TEST_SET=dotenv\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KGCHECK_TEST_FROM_DOTENV", raising=False)
    monkeypatch.setenv("KGCHECK_TEST_SET", "shell")
    try:
        assert cli.invoke(app, ["settings", "dka"]).exit_code == 0
        assert os.environ.get("KGCHECK_TEST_FROM_DOTENV") == "yes"
        assert os.environ["KGCHECK_TEST_SET"] == "shell"
    finally:
        os.environ.pop("KGCHECK_TEST_FROM_DOTENV", None)


def test_run_table_fits_80_columns_without_breaking_a_model_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = _narrow(monkeypatch)
    result = cli.invoke(app, ["run", "--dataset", "factbench", "--limit", "5", "--no-progress",
                              "--model", "replay:llama3.1:8b", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = buffer.getvalue()
    assert "replay:llama3.1:8b" in text and "F1(T)" in text
    # The paths stay whole on their own lines (never wrapped); everything else fits.
    lines = text.splitlines()
    assert f"verdicts: {tmp_path / 'verdicts.jsonl'}" in lines
    assert f"summary: {tmp_path / 'summary.json'}" in lines
    assert max(len(line) for line in lines if not line.startswith(("verdicts: /",
                                                                   "summary: /"))) <= WIDTH


def test_progress_bar_fits_80_columns_and_names_the_phase() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=WIDTH)
    progress = run_module._progress(False)
    state = {"na": 0, "ties": 444, "errors": 0}
    progress.add_task("GIV-F DBpedia members", total=9344, completed=9344, rate=173.5,
                      tally=run_module._tally(state, "members"))
    console.print(progress.get_renderable())
    line = buffer.getvalue().rstrip("\n")
    assert "\n" not in line and len(line) <= WIDTH and "…" not in line
    assert "members" in line and "ties 444" in line and "NA 0" in line


async def test_consensus_progress_names_each_phase_and_counts_ties(
        panel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    titles: list[tuple[str, str]] = []
    real = run_module._progress

    def spy(disable: bool, *args, **kwargs):
        progress = real(True, *args, **kwargs)
        add, update = progress.add_task, progress.update

        def add_task(description: str, **fields):
            titles.append((description, fields["tally"]))
            return add(description, **fields)

        def record(task, **fields):
            if "tally" in fields:
                titles.append((progress.tasks[0].description, fields["tally"]))
            return update(task, **fields)

        progress.add_task, progress.update = add_task, record  # type: ignore[method-assign]
        return progress

    monkeypatch.setattr(run_module, "_progress", spy)
    await run(tmp_path / "o", "cons-up", siblings="a=big-a,b=big-b,c=big-c,d=big-d")
    phases = list(dict.fromkeys(title for title, _ in titles))
    assert phases == ["DKA Mini members", "DKA Mini judge"]
    last_votes = [tally for title, tally in titles if title.endswith("members")][-1]
    assert last_votes == "ties 2 NA 0 errors 0"


async def test_consensus_summary_prints_members_ties_and_alignment_readably(
        panel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    result = await run(tmp_path / "o", "scripted:big-a")
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    # Member a votes T T F T F T against gold T T F T F F: F1(T) 6/7, F1(F) 4/5.
    own = summary["member_scores"]["scripted:a"]
    assert own["f1_true"] == pytest.approx(6 / 7) and own["f1_false"] == pytest.approx(0.8)
    buffer = _narrow(monkeypatch)
    print_summary(result.summary)
    text = buffer.getvalue()
    assert "consensus of 4 models" in text and "{" not in text and "'" not in text
    assert "NA 444" not in text and "ties: 2 of 6" in text
    for member in MEMBERS:
        row = next(line for line in text.splitlines() if f" {member} " in line)
        assert summary["alignment"][member] == pytest.approx(float(row.split()[-2]), abs=5e-4)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert len(FACTS) == 6


def test_the_studio_guides_rag_example_has_documents_in_the_sample_corpus() -> None:
    from kgcheck.retrievers.store import FolderSource

    root = Path(__file__).resolve().parents[2]
    readme = (root / "docs" / "guides" / "studio.md").read_text(encoding="utf-8")
    after = readme[readme.index("For `rag`, pick a fact"):]
    block = after[after.index("```json") + len("```json"):]
    fact = json.loads(block[:block.index("```")])["fact"]
    docs = FolderSource(root / "vendored" / "sample-corpus").documents(fact["dataset"].lower(),
                                                                   fact["id"])
    assert docs, fact
    assert any(fact["subject"].split("_")[0] in d.text for d in docs)
