"""The public API: explicit signatures, settings as keywords, Python-named errors, twins."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

import kgcheck
from kgcheck import api
from tests.support.stubs import Behaviour, OllamaStub

TRIPLES = "subject,predicate,object\nParis,capital of,France\nBerlin,capital of,Spain\n"
RUN_PARAMETERS = {"facts", "dataset", "triples", "sparql", "strategy", "model", "out",
                  "sample", "seed", "concurrency", "resume", "engine", "cache", "settings"}


@pytest.fixture(scope="module")
def ollama():
    with OllamaStub(Behaviour(answer="T")) as stub:
        yield stub


@pytest.fixture
def triples(tmp_path: Path) -> Path:
    path = tmp_path / "kg.csv"
    path.write_text(TRIPLES, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["run", "arun", "dry_run", "adry_run"])
def test_entry_points_show_their_parameters(name: str) -> None:
    parameters = inspect.signature(getattr(kgcheck, name)).parameters
    assert RUN_PARAMETERS - {"concurrency", "engine", "cache"} <= set(parameters)
    kinds = [p.kind for p in parameters.values()]
    assert kinds[-1] is inspect.Parameter.VAR_KEYWORD  # a strategy's settings as keywords
    assert "plan" not in parameters and "kwargs" not in parameters


@pytest.mark.parametrize(("sync", "twin"), [("run", "arun"), ("dry_run", "adry_run"),
                                            ("check", "acheck"),
                                            ("import_verdicts", "aimport_verdicts")])
def test_sync_and_async_twins_take_the_same_arguments(sync: str, twin: str) -> None:
    assert inspect.iscoroutinefunction(getattr(api, twin))
    assert not inspect.iscoroutinefunction(getattr(api, sync))
    assert (inspect.signature(getattr(api, sync)).parameters
            == inspect.signature(getattr(api, twin)).parameters)


def test_run_takes_base_url_as_a_keyword(ollama: OllamaStub, triples: Path,
                                         tmp_path: Path) -> None:
    result = kgcheck.run(triples=triples, model="ollama:gemma2:9b", base_url=ollama.url,
                         out=tmp_path / "run", max_retries=0)
    assert result.summary["n"] == 2 and result.summary["errors"] == 0
    assert result.summary["verdicts"]["T"] == 2
    assert len(ollama.calls()) == 2  # the stub answered, not a recording


def test_dry_run_takes_base_url_as_a_keyword(ollama: OllamaStub, triples: Path,
                                             tmp_path: Path) -> None:
    found = kgcheck.dry_run(triples=triples, model="ollama:gemma2:9b", base_url=ollama.url,
                            out=tmp_path / "run")
    assert found.facts == 2 and found.calls >= 2


def test_a_setting_given_twice_is_refused(triples: Path, tmp_path: Path) -> None:
    with pytest.raises(kgcheck.SettingsError, match=r"max_attempts given both"):
        kgcheck.dry_run(triples=triples, model="ollama:x", settings={"max_attempts": 2},
                        max_attempts=3)


def test_check_goes_through_the_runner(ollama: OllamaStub) -> None:
    facts = [{"subject": "Paris", "predicate": "capital of", "object": "France"},
             {"subject": "Rome", "predicate": "capital of", "object": "Italy"}]
    verdicts = kgcheck.check(facts, model="ollama:gemma2:9b", base_url=ollama.url)
    assert [v.fact_id for v in verdicts] == ["1", "2"]
    assert [v.label for v in verdicts] == ["T", "T"]


def test_errors_name_python_arguments(triples: Path, tmp_path: Path) -> None:
    with pytest.raises(kgcheck.SettingsError) as caught:
        kgcheck.run(triples=triples, resume=True, fresh=True, out=tmp_path / "r")
    assert str(caught.value) == "resume=True and fresh=True contradict each other; pick one"
    with pytest.raises(ValueError, match=r"^limit=0 must be at least 1$"):
        kgcheck.dry_run(triples=triples, limit=0)
    with pytest.raises(ValueError, match=r"give exactly one of dataset, triples, sparql, "
                                         r"facts"):
        kgcheck.dry_run()


def test_a_second_run_into_a_folder_advises_python_arguments(tmp_path: Path) -> None:
    kgcheck.run(dataset="yago", limit=2, out=tmp_path / "r")
    with pytest.raises(kgcheck.api.RunError) as caught:
        kgcheck.run(dataset="yago", limit=2, out=tmp_path / "r")
    assert "pass resume=True to continue that run, fresh=True to start over" in str(
        caught.value)
    assert "--" not in str(caught.value)


def test_review_errors_name_python_arguments(tmp_path: Path) -> None:
    kgcheck.run(dataset="yago", limit=2, out=tmp_path / "r")
    with pytest.raises(ValueError) as caught:
        kgcheck.open_review(tmp_path / "r", only=["X"])
    assert str(caught.value).startswith("only=['X']: unknown filter X")


def test_sync_twin_inside_an_event_loop_names_the_async_one() -> None:
    async def inside() -> None:
        kgcheck.run(dataset="yago", limit=1)

    with pytest.raises(RuntimeError, match=r"await kgcheck\.arun"):
        asyncio.run(inside())


def test_open_review_is_also_a_sync_context_manager(tmp_path: Path) -> None:
    result = kgcheck.run(dataset="yago", limit=2, out=tmp_path / "r")
    first = str(result.records[0]["fact_id"])
    with kgcheck.open_review(tmp_path / "r") as review:
        review.decide(first, "F")
        assert review.progress()["decided"] == 1
        assert review.undo() == first
        review.decide(first, "T")
    assert first in (tmp_path / "r" / "labels.csv").read_text(encoding="utf-8")


def test_import_verdicts_has_an_async_twin(tmp_path: Path) -> None:
    verdicts = tmp_path / "v.csv"
    facts = kgcheck.load_dataset("yago")[:2]
    verdicts.write_text("fact_id,label\n" + "".join(f"{f.id},T\n" for f in facts))

    async def main() -> int:
        result = await kgcheck.aimport_verdicts(verdicts, tmp_path / "imp", dataset="yago")
        return int(result.summary["n"])

    assert asyncio.run(main()) == 2
