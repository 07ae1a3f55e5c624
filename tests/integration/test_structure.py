"""The structure holds: one-way layers, settings declared once, strategies label their verdicts."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from kgcheck.data.datasets import load_facts
from kgcheck.graphs.consensus.graph import ConsensusContext, settings_class
from kgcheck.graphs.registry import strategies
from kgcheck.graphs.strategies.rag import RAGContext
from kgcheck.providers import ModelSettings
from kgcheck.retrievers.settings import RetrievalSettings
from tests.support.package_tree import ROOT, build_tree
from tests.support.scripted import SCRIPTED, register_scripted
from tests.support.stubs import Behaviour, OllamaStub

SAMPLE_CORPUS = ROOT / "vendored" / "sample-corpus"
STUDY_SAMPLING = {"temperature": 0.75, "top_p": 0.9, "top_k": 40, "num_predict": 512,
                  "repeat_penalty": 1.1}


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    """Run import-linter with the project's contract over a package tree."""
    command = [str(Path(sys.executable).with_name("lint-imports")), str(ROOT / "pyproject.toml")]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=120)


def test_the_layers_contract_is_kept(tmp_path: Path) -> None:
    result = lint_imports(build_tree(tmp_path / "tree"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


def test_an_import_against_the_layers_is_caught(tmp_path: Path) -> None:
    tree = build_tree(tmp_path / "tree")
    # The data layer, with one module that reaches up into the graphs.
    data = tree / "kgcheck" / "data"
    real = data.resolve()
    data.unlink()
    data.mkdir()
    for module in real.glob("*.py"):
        (data / module.name).symlink_to(module)
    (data / "upward.py").write_text("from kgcheck.graphs.votes import tally\n")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "kgcheck.data.upward -> kgcheck.graphs.votes" in result.stdout


def test_a_cli_import_below_the_api_is_caught(tmp_path: Path) -> None:
    """The command line reaches the layers below only through kgcheck.api."""
    tree = build_tree(tmp_path / "tree")
    commands = tree / "kgcheck" / "cli" / "commands"
    real = (tree / "kgcheck" / "cli").resolve()
    (tree / "kgcheck" / "cli").unlink()
    shutil.copytree(real, tree / "kgcheck" / "cli",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (commands / "reaching.py").write_text("def run() -> None:\n"
                                          "    from kgcheck.runs.plan import plan_run\n")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "The command line imports only the API layer" in result.stdout
    assert "kgcheck.cli.commands.reaching -> kgcheck.runs.plan" in result.stdout


def _contexts() -> dict[str, type]:
    found: dict[str, type] = {name: s.context for name, s in strategies().items()}
    found["consensus"] = ConsensusContext
    found.update({f"consensus+{name}": settings_class(s.context)
                  for name, s in strategies().items()})
    return found


@pytest.mark.parametrize("name", sorted(_contexts()))
def test_model_settings_are_declared_once(name: str) -> None:
    """No strategy declares a setting under a model setting's name (RAG's old ``top_k``)."""
    context = _contexts()[name]
    shared = set(ModelSettings.names()) | {f.name for f in dataclasses.fields(RetrievalSettings)}
    for cls in context.__mro__:
        if cls in (ModelSettings, RetrievalSettings) or not dataclasses.is_dataclass(cls):
            continue
        redeclared = shared & set(vars(cls).get("__annotations__", {}))
        assert not redeclared, f"{cls.__name__} redeclares {sorted(redeclared)}"
    base = {f.name: f for f in dataclasses.fields(ModelSettings)}
    for item in dataclasses.fields(context):
        if item.name in base:
            assert item.default == base[item.name].default, item.name


def test_only_rag_takes_retrieval_settings() -> None:
    retrieval = {f.name for f in dataclasses.fields(RetrievalSettings)}
    for name, strategy in strategies().items():
        fields = {f.name for f in dataclasses.fields(strategy.context)}
        assert (retrieval <= fields) == issubclass(strategy.context, RetrievalSettings), name


@pytest.fixture
def says_t():
    """``scripted:says-t``: a model that answers T to every call."""
    register_scripted("says-t", lambda: GenericFakeChatModel(
        messages=itertools.repeat(AIMessage(content="T"))))
    yield "scripted:says-t"
    SCRIPTED.pop("says-t", None)


@pytest.mark.parametrize("name", sorted(strategies()))
async def test_each_strategy_labels_its_verdicts_as_it_declares(name: str, says_t,
                                                                tmp_path: Path) -> None:
    strategy = strategies()[name]
    fact = next(f for f in load_facts("yago") if f.id == "10143")
    values = {"model": says_t}
    if issubclass(strategy.context, RetrievalSettings):
        values.update(corpus=str(SAMPLE_CORPUS), index="memory")
    out = await strategy.compile().ainvoke({"fact": fact.as_input()},
                                           context=strategy.make_context(**values))
    assert set(out) == {"verdict"}  # the output schema: the verdict only
    assert out["verdict"]["method"] == strategy.label
    assert out["verdict"]["error"] is None, out["verdict"]


async def test_rag_requests_carry_the_studys_sampling(tmp_path: Path) -> None:
    """Each of RAG's model calls goes out with top_k 40 and the study's other settings."""
    fact = next(f for f in load_facts("yago") if f.id == "10143")
    answer = 'Arlene Alda is married to Alan Alda.\n{"output": "yes"}'
    rag = strategies()["rag"]
    with OllamaStub(Behaviour(answer=answer)) as stub:
        ctx = rag.make_context(model="ollama:gemma2:9b", base_url=stub.url,
                               corpus=str(SAMPLE_CORPUS), index="memory")
        out = await rag.compile().ainvoke({"fact": fact.as_input()}, context=ctx)
        calls = stub.calls()
    assert out["verdict"]["label"] == "T"
    assert len(calls) == 3  # sentence, questions, verdict
    assert [c.body["options"] for c in calls] == [STUDY_SAMPLING] * 3
    assert len(out["verdict"]["details"]["evidence"]) <= RAGContext().top_chunks == 6

    # Sampling and evidence are separate settings: each changes only itself.
    with OllamaStub(Behaviour(answer=answer)) as stub:
        ctx = rag.make_context(model="ollama:gemma2:9b", base_url=stub.url, top_k=5,
                               top_chunks=1, corpus=str(SAMPLE_CORPUS), index="memory")
        out = await rag.compile().ainvoke({"fact": fact.as_input()}, context=ctx)
        calls = stub.calls()
    assert {c.body["options"]["top_k"] for c in calls} == {5}
    assert len(out["verdict"]["details"]["evidence"]) == 1
