"""Every command kgcheck prints as advice works when typed as printed.

Each case brings about the message (an interrupted run, failed facts, an analysis of a run
without labels, ...), takes the command out of what was printed and runs it: it must do what
the message says (the run goes on to the end) or, for a command that starts a server, be
accepted by the command line's parser. Commands quoted in messages with placeholders
(``NAME``, ``FILE``) are parsed with the placeholders filled in.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kgcheck.cli import app
from tests.stubs import Behaviour, OllamaStub
from tests.stubs.process import start_stub_process

runner = CliRunner()
KGCHECK = Path(sys.executable).parent / "kgcheck"
ROOT = Path(__file__).resolve().parent.parent
# A path in advice: quoted when it holds a space, else up to the comma or semicolon that
# ends its clause.
PATH = r"(?:'[^']*'|[^\s,;]+)"


def _text(result) -> str:
    return " ".join(result.output.split())


def _verdicts(out: Path) -> dict[str, dict]:
    records = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    return {r["fact_id"]: r for r in records}


def _advised(text: str, pattern: str) -> list[str]:
    """Return the command a message advises (``pattern``'s group 1), split as a shell would."""
    found = re.search(pattern, text)
    assert found, text
    return shlex.split(found.group(1))


def _parses(args: list[str]) -> None:
    """Assert the command line takes ``args`` (``kgcheck`` left out) without running them."""
    command: Any = typer.main.get_command(app)
    name, words, parent = "kgcheck", list(args), None
    # Down the command groups (``corpus import``) to the command itself.
    while hasattr(command, "get_command") and words and not words[0].startswith("-"):
        ctx = command.context_class(command, info_name=name, parent=parent)
        sub = command.get_command(ctx, words[0])
        assert sub is not None, f"no command {words[0]!r} in {args}"
        parent, command, name, words = ctx, sub, words[0], words[1:]
    assert not hasattr(command, "get_command"), f"{args} names no command"
    # Raises click's usage error for an option or argument the command does not take.
    command.make_context(name, words, parent=parent)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KGCHECK_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KGCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_interrupted_run_goes_on_with_the_command_it_prints(home: Path) -> None:
    # A model that takes a while, in a process of its own; the run is stopped by Ctrl-C.
    stub, url = start_stub_process("tests.stubs", "ollama", "--answer", "T", "--delay", "0.5")
    out = home / "runs" / "intr"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OLLAMA_"))}
    try:
        run = subprocess.Popen(
            [str(KGCHECK), "run", "--dataset", "yago", "--limit", "6", "--model",
             "ollama:gemma2:9b", "--base-url", url, "--concurrency", "1", "--no-progress",
             "--no-cache", "--set", "temperature=0.1", "--out", str(out)],
            cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
                (out / "verdicts.jsonl").is_file()
                and (out / "verdicts.jsonl").read_text().count("\n") >= 1):
            assert run.poll() is None, run.communicate()
            time.sleep(0.1)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
        assert run.returncode == 130, err
        advice = _advised(" ".join(err.split()), r"continue with (--resume --out " + PATH + ")")
        assert len(_verdicts(out)) < 6
        # As printed: no input, strategy or model given again.
        again = subprocess.run([str(KGCHECK), "run", *advice, "--no-progress"], cwd=home,
                               env=env, capture_output=True, text=True, timeout=180)
        assert again.returncode == 0, again.stderr[-3000:]
    finally:
        stub.kill()
        stub.wait(timeout=10)
    verdicts = _verdicts(out)
    assert len(verdicts) == 6 and all(v["label"] == "T" for v in verdicts.values()), verdicts
    assert json.loads((out / "run.json").read_text())["settings"]["temperature"] == 0.1


@pytest.mark.parametrize(("facts", "failing", "pattern"), [
    # Every fact failed: the advice is the resume once the cause is fixed.
    (3, 3, r"rerun with (--resume --out " + PATH + ") once the cause is fixed"),
    # Some did: the advice is the resume that retries them.
    (4, 2, r"; (--resume --out " + PATH + ") retries them"),
])
def test_failed_facts_are_retried_by_the_command_printed(home: Path, facts: int, failing: int,
                                                         pattern: str) -> None:
    out = home / "my run"  # a space: the printed command quotes it
    # The server fails the first calls, then answers: the cause is gone when the advice runs.
    with OllamaStub(Behaviour(answer="T", fail_times=failing, fail_status=500)) as stub:
        first = runner.invoke(app, [
            "run", "--dataset", "yago", "--limit", str(facts), "--model", "ollama:gemma2:9b",
            "--base-url", stub.url, "--concurrency", "1", "--no-progress", "--no-cache",
            "--set", "max_retries=0", "--out", str(out)])
        advice = _advised(_text(first), pattern)
        again = runner.invoke(app, ["run", *advice, "--no-progress", "--no-cache"])
    assert again.exit_code == 0, again.output
    verdicts = _verdicts(out)
    assert len(verdicts) == facts and all(v["error"] is None for v in verdicts.values()), \
        verdicts


def test_a_resume_given_only_the_folder_refuses_other_settings_in_one_line(home: Path) -> None:
    out = home / "run"
    assert runner.invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--strategy",
                               "giv-z", "--out", str(out), "--no-progress"]).exit_code == 0
    other = runner.invoke(app, ["run", "--resume", "--out", str(out), "--strategy", "dka",
                                "--no-progress"])
    assert other.exit_code == 2
    errors = [line for line in other.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot resume" in errors[0] and "strategy" in errors[0], \
        other.output
    # Its advice to start over, as printed, starts the folder's run over.
    fresh = _advised(_text(other), r"[Ss]tart over with (--fresh --out " + PATH + ")")
    again = runner.invoke(app, ["run", *fresh, "--no-progress"])
    assert again.exit_code == 0, again.output
    assert {v["method"] for v in _verdicts(out).values()} == {"GIV-Z"}
    # More facts of the same run: the folder's strategy, model and input, two more facts.
    more = runner.invoke(app, ["run", "--resume", "--out", str(out), "--limit", "4",
                               "--no-progress"])
    assert more.exit_code == 0, more.output
    verdicts = _verdicts(out)
    assert len(verdicts) == 4 and {v["method"] for v in verdicts.values()} == {"GIV-Z"}


def test_a_resume_of_a_folder_without_a_run_says_what_to_give(home: Path) -> None:
    result = runner.invoke(app, ["run", "--resume", "--out", str(home / "nothing")])
    assert result.exit_code == 2
    assert "nothing to resume in" in _text(result)
    assert "--dataset, --triples, --sparql" in _text(result)


def test_errors_without_labels_advises_a_review_that_the_parser_takes(home: Path) -> None:
    out = home / "run"
    assert runner.invoke(app, ["run", "--triples", str(_unlabelled(home)), "--out", str(out),
                               "--model", "replay:gemma2:9b", "--as-dataset", "yago",
                               "--no-progress"]).exit_code in (0, 1)
    analysed = runner.invoke(app, ["errors", str(out), "--out", str(home / "errors")])
    assert analysed.exit_code == 2
    text = _text(analysed)
    assert "--labels," not in text and "run it with --labels" not in text
    commands = re.findall(r"`kgcheck ([^`]+)`", text)
    assert commands, text
    for command in commands:
        _parses(shlex.split(command))


def _unlabelled(home: Path) -> Path:
    facts = home / "facts.csv"
    facts.write_text("subject,predicate,object\nParis,capitalOf,France\n")
    return facts


# Commands quoted in messages with placeholders: each, filled in, is one the parser takes.
QUOTED = [
    "corpus import --dataset NAME --from FOLDER_OR_TARBALL",
    "review RUN",
    "sample --run RUN --design stratified --n N --out FILE.csv",
    "errors RUN --out {folder}",
]


def _message_text() -> str:
    """Return kgcheck's source with adjacent string literals joined (as messages print)."""
    text = "\n".join(p.read_text(encoding="utf-8")
                     for folder in ("kgcheck", "evals", "retrievers", "graphs")
                     for p in (ROOT / folder).rglob("*.py"))
    return re.sub(r'"\s*\n\s*f?"', "", text)


@pytest.mark.parametrize("quoted", QUOTED)
def test_commands_quoted_in_messages_are_taken_by_the_parser(quoted: str) -> None:
    # Still what a message quotes: the list follows the messages.
    assert f"`kgcheck {quoted}`" in _message_text(), quoted
    filled = [{"NAME": "yago", "FOLDER_OR_TARBALL": "data", "RUN": "runs/a",
               "{folder}": "out", "N": "20", "FILE.csv": "sample.csv"}.get(word, word) for word in shlex.split(quoted)]
    _parses(filled)
