"""RunSpec: one declaration of a run's options that the CLI, the API and run.json share."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import kgcheck
from kgcheck import api
from kgcheck.cli import app
from kgcheck.cli.commands import run as run_command
from kgcheck.runs.spec import RunSpec, cli_fields, option_meta, python_fields, spec_changes

runner = CliRunner()
# What the Python functions take besides the spec's fields.
PYTHON_OWN = {"spec", "warn", "strategy_settings"}


def _command(name: str):
    return typer.main.get_command(app).get_command(None, name)


def test_the_cli_run_options_are_the_spec_fields() -> None:
    params = {p.name: p for p in _command("run").params if p.name != "help"}
    assert set(params) == set(cli_fields()) | set(run_command.COMMAND_FLAGS)
    for name in cli_fields():
        meta = option_meta(name)
        flags = meta.get("flags", ["--" + name.replace("_", "-")])
        shown = params[name].opts + params[name].secondary_opts
        assert {f for flag in flags for f in flag.split("/")} <= set(shown), name
        assert params[name].help == RunSpec.model_fields[name].description, name
        default = meta.get("cli_default", RunSpec.model_fields[name].default)
        assert params[name].default == default, name


@pytest.mark.parametrize("name", ["run", "arun", "dry_run", "adry_run"])
def test_the_python_signature_is_the_spec_fields(name: str) -> None:
    parameters = inspect.signature(getattr(kgcheck, name)).parameters
    assert set(parameters) - PYTHON_OWN == set(python_fields())
    for field in python_fields():
        assert parameters[field].default == RunSpec.model_fields[field].default, field


def test_a_spec_is_the_same_run_as_its_keywords(tmp_path: Path) -> None:
    spec = RunSpec(dataset="yago", limit=2, out=tmp_path / "a")
    by_spec = kgcheck.run(spec=spec)
    by_keywords = kgcheck.run(dataset="yago", limit=2, out=tmp_path / "b")
    assert ({r["fact_id"]: r["label"] for r in by_spec.records}
            == {r["fact_id"]: r["label"] for r in by_keywords.records})
    # Keywords given besides a spec replace its fields.
    found = kgcheck.dry_run(spec=spec, limit=1)
    assert found.facts == 1


def test_run_json_keeps_the_spec_and_it_makes_the_same_spec(tmp_path: Path) -> None:
    out = tmp_path / "r"
    result = runner.invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--no-progress",
                                 "--concurrency", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    stored = json.loads((out / "run.json").read_text())["spec"]
    assert stored["version"] == 1
    fields = stored["fields"]
    assert fields["dataset"] == "yago" and fields["limit"] == 2 and fields["concurrency"] == 2
    assert "facts" not in fields  # facts in memory are identified by the input fingerprint
    again = RunSpec(**fields)
    assert again.stored() == stored


def test_resume_refuses_a_changed_option_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "r"
    first = runner.invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--no-progress",
                                "--out", str(out)])
    assert first.exit_code == 0, first.output
    # The run's repeats may not change on resume; concurrency and progress may.
    fine = runner.invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--progress",
                               "--concurrency", "3", "--out", str(out), "--resume"])
    assert fine.exit_code == 0, fine.output
    spec = json.loads((out / "run.json").read_text())["spec"]
    changed = RunSpec(**{**spec["fields"], "repeats": 3})
    assert spec_changes(spec, changed.stored()) == ["repeats (1 then, 3 now)"]
    with pytest.raises(api.RunError, match=r"changed: repeats \(1 then, 3 now\)"):
        kgcheck.run(dataset="yago", limit=2, out=out, resume=True, repeats=3)


def test_spec_rules_name_the_arguments() -> None:
    with pytest.raises(kgcheck.SettingsError, match=r"^judge='x' needs consensus"):
        RunSpec(dataset="yago", judge="x")
    with pytest.raises(kgcheck.SettingsError, match=r"ray_address, ray_workers and "
                                                     r"ray_shard_mb need engine='ray'"):
        RunSpec(dataset="yago", ray_workers=2)
    with pytest.raises(kgcheck.SettingsError, match=r"^limit='many': "):
        RunSpec(dataset="yago", limit="many")
    result = runner.invoke(app, ["run", "--dataset", "yago", "--ray-workers", "2"])
    assert result.exit_code == 2
    assert "--ray-address, --ray-workers and --ray-shard-mb need --engine ray" in " ".join(
        result.output.split())


def test_errors_takes_the_model_options_of_run(tmp_path: Path) -> None:
    """`kgcheck errors --base-url URL --set KEY=VALUE` reaches the server as `run`'s does."""
    from tests.integration.test_errors import PER_FAMILY, make_error_run
    from tests.support.stubs import Behaviour, OpenAIStub

    run = make_error_run(tmp_path / "run", model="ollama:unused", carried=PER_FAMILY - 1)
    with OpenAIStub(Behaviour(answer="A nearby city.", tokens_in=8, tokens_out=4)) as stub:
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL")}
        result = runner.invoke(app, [
            "errors", str(run), "--out", str(tmp_path / "out"), "--model",
            "openai-compatible:stub-model", "--min-cluster-size", "2", "--base-url", stub.url,
            "--set", "temperature=0.25", "--set", "max_retries=0"], env=env)
        seen = [c for c in stub.calls() if c.path.endswith("/chat/completions")]
    assert result.exit_code == 0, result.output
    assert len(seen) == 3  # one error per family carried no explanation
    assert {c.body["temperature"] for c in seen} == {0.25}
