"""The command line's shell: lazy commands, flags spelled from the API's arguments, help."""

from __future__ import annotations

import inspect
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kgcheck import api
from kgcheck.cli import app
from kgcheck.cli.app import COMMANDS, every_command

cli = CliRunner()
TRIPLES = "subject,predicate,object\nParis,capital of,France\nBerlin,capital of,Spain\n"


def _modules_after(*args: str) -> set[str]:
    """Run ``kgcheck ARGS`` in a fresh interpreter; return the kgcheck modules it imported."""
    code = ("import sys\nfrom kgcheck.cli import app\n"
            "try:\n    app(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('\\n' + ' '.join(m for m in sys.modules if m.startswith('kgcheck')))")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=120, check=True)
    return set(done.stdout.strip().splitlines()[-1].split())


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_command(args: list[str]) -> None:
    loaded = _modules_after(*args)
    assert "kgcheck.cli.app" in loaded
    assert not {m for m in loaded if m.startswith("kgcheck.cli.commands.")}
    assert not loaded & {"kgcheck.api", "kgcheck.graphs", "kgcheck.runs", "kgcheck.data"}


def test_a_commands_help_imports_that_command_alone_and_no_api() -> None:
    loaded = _modules_after("run", "--help")
    commands = {m for m in loaded if m.startswith("kgcheck.cli.commands.")}
    assert commands == {"kgcheck.cli.commands.run"}
    assert "kgcheck.api" not in loaded and "kgcheck.graphs" not in loaded


def test_every_command_module_is_listed() -> None:
    """A module COMMANDS does not name still works, but is imported by every --help."""
    import pkgutil

    from kgcheck.cli import commands

    modules = {m.name for m in pkgutil.iter_modules(commands.__path__)}
    assert modules == {listed.module for listed in COMMANDS.values()}


def test_listed_summaries_are_the_commands_docstrings() -> None:
    group = every_command()
    assert set(group.commands) == set(COMMANDS)
    for name, listed in COMMANDS.items():
        command = group.commands[name]
        own = (command.help or "").strip().splitlines()[0]
        assert listed.summary == own, name


def test_the_top_level_help_lists_every_command() -> None:
    result = cli.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name, listed in COMMANDS.items():
        assert name in result.output and listed.summary[:40] in result.output


def test_a_mistyped_command_suggests_one_not_yet_loaded() -> None:
    result = cli.invoke(app, ["reproduse"])
    assert result.exit_code == 2 and "Did you mean 'reproduce'" in result.output


def test_the_cli_default_model_is_the_apis() -> None:
    from kgcheck.cli.commands import run

    assert run.DEFAULT_MODEL == api.DEFAULT_MODEL
    assert inspect.signature(api.run).parameters["model"].default == run.DEFAULT_MODEL


def test_help_shows_extras_in_brackets() -> None:
    result = cli.invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert "pip install 'kgcheck[ray]'" in result.output
    assert "pip install 'kgcheck'" not in result.output


def test_no_help_text_loses_a_bracketed_word() -> None:
    """Rich markup swallows ``[word]``: every help text escapes its brackets."""
    import re

    group = every_command()
    pending = [([name], c) for name, c in group.commands.items()]
    while pending:
        words, command = pending.pop()
        for param in command.params:
            for bracket in re.findall(r"(?<!\\)\[[a-z][a-z,-]*\]", getattr(param, "help", "")
                                      or ""):
                pytest.fail(f"kgcheck {' '.join(words)} {param.name}: {bracket} unescaped")
        pending += [([*words, n], c) for n, c in getattr(command, "commands", {}).items()]


def test_strategy_is_the_flag_and_method_its_alias(tmp_path: Path) -> None:
    for flag, out in (("--strategy", "a"), ("--method", "b")):
        result = cli.invoke(app, ["run", "--dataset", "yago", "--limit", "2", flag, "giv-f",
                                  "--out", str(tmp_path / out), "--no-progress"])
        assert result.exit_code == 0, result.output
        info = json.loads((tmp_path / out / "run.json").read_text())
        assert info["strategy"] == "giv-f"
    assert cli.invoke(app, ["settings", "giv-f"]).output.count("--strategy giv-f") == 1


def test_errors_name_flags_on_the_command_line(tmp_path: Path) -> None:
    args = ["run", "--dataset", "yago", "--limit", "2", "--out", str(tmp_path), "--no-progress"]
    assert cli.invoke(app, args).exit_code == 0
    again = cli.invoke(app, args)
    text = " ".join(again.output.split())
    assert again.exit_code == 2
    assert "pass --resume to continue that run, --fresh to start over, or another --out" in text
    assert "resume=True" not in text
    both = cli.invoke(app, [*args, "--resume", "--fresh"])
    assert "--resume and --fresh contradict each other" in both.output


def test_review_errors_name_flags(tmp_path: Path) -> None:
    assert cli.invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--out",
                            str(tmp_path), "--no-progress"]).exit_code == 0
    result = cli.invoke(app, ["review", str(tmp_path), "--only", "X,F"])
    assert result.exit_code == 2
    assert "--only X,F: unknown filter X" in " ".join(result.output.split())


def test_replay_on_your_own_file_does_not_advise_a_resume(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text(TRIPLES, encoding="utf-8")
    result = cli.invoke(app, ["run", "--triples", str(path), "--as-dataset", "yago", "--out",
                              str(tmp_path / "r"), "--no-progress"])
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "every fact failed" in text
    assert "--resume" not in text and "replays the same recorded answers" in text


def test_rag_without_evidence_suggests_live_sources_on_the_command_line(tmp_path: Path) -> None:
    corpus = tmp_path / "rag_dataset" / "yago" / "10019"
    corpus.mkdir(parents=True)
    (corpus / "0.txt").write_text("Paul Spence produced the film FUBAR in 2002.")
    result = cli.invoke(app, ["run", "--dataset", "yago", "--strategy", "rag", "--limit", "3",
                              "--set", f"corpus={tmp_path}", "--set", "index=memory",
                              "--out", str(tmp_path / "o"), "--no-progress"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "--set sources=wikipedia" in text and "kgcheck corpus import" in text
    assert "--set corpus=PATH" in text


def test_rag_without_evidence_names_the_setting_to_python_callers(tmp_path: Path) -> None:
    corpus = tmp_path / "rag_dataset" / "yago" / "10019"
    corpus.mkdir(parents=True)
    (corpus / "0.txt").write_text("Paul Spence produced the film FUBAR in 2002.")
    plan = api.plan_run(dataset="yago", strategy="rag", limit=3, corpus=str(tmp_path),
                        index="memory", out=tmp_path / "o")
    (note,) = [n for n in plan.notes if "no documents" in n]
    assert "sources='wikipedia'" in note and "corpus=PATH" in note and "--set" not in note


def test_the_run_prints_predicates_most_often_judged_false_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kgcheck.cli.commands import run

    buffer = io.StringIO()
    monkeypatch.setattr(run, "console", Console(file=buffer, width=100))
    result = cli.invoke(app, ["run", "--dataset", "yago", "--limit", "12", "--out",
                              str(tmp_path), "--no-progress"])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "summary.json").read_text())["by_predicate"]
    lines = buffer.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "most often judged false" in line)
    shown = [line.split("│")[1].strip() for line in lines[start:]
             if line.startswith("│") and line.split("│")[1].strip()]
    expected = sorted(rows, key=lambda r: (-r["judged_false"], -r["n"], r["predicate"]))
    assert shown == [r["predicate"] for r in expected][:run.PREDICATE_ROWS]
    assert len({r["judged_false"] for r in rows}) > 1  # the order is not the input's
