"""``--prefilter schema``: refuted facts are F without a model call; the rest are asked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from tests.integration.test_schema_rules import KG_LINES, ONTOLOGY
from tests.support.stubs import Behaviour, OllamaStub, OpenAIStub

runner = CliRunner()


@pytest.fixture(scope="module")
def openai_server() -> Iterator[OpenAIStub]:
    with OpenAIStub(Behaviour(answer="T")) as stub:
        yield stub


@pytest.fixture(scope="module")
def ollama_server() -> Iterator[OllamaStub]:
    with OllamaStub(Behaviour(answer="T")) as stub:
        yield stub


@pytest.fixture
def kg(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "onto.ttl").write_text(ONTOLOGY)
    (tmp_path / "kg.nt").write_text("\n".join(KG_LINES) + "\n")
    return {"onto": tmp_path / "onto.ttl", "kg": tmp_path / "kg.nt"}


def _schema_refuted(kg: dict[str, Path], tmp_path: Path) -> set[str]:
    out = tmp_path / "schema"
    result = runner.invoke(app, ["run", "--triples", str(kg["kg"]), "--strategy", "schema",
                                 "--ontology", str(kg["onto"]), "--out", str(out),
                                 "--no-progress", "--set", f"kg={kg['kg']}"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    return {r["fact_id"] for r in records if r["label"] == "F"}


@pytest.mark.parametrize(("stub", "model"), [("openai_server", "openai-compatible:stub-model"),
                                             ("ollama_server", "ollama:gemma2:9b")])
def test_refuted_facts_cost_no_call(request, kg: dict[str, Path], tmp_path: Path, stub: str,
                                    model: str) -> None:
    server = request.getfixturevalue(stub)
    refuted = _schema_refuted(kg, tmp_path)
    assert refuted  # the KG has broken rules: its partOf cycle
    before = len(server.calls())
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--triples", str(kg["kg"]), "--model", model,
                                 "--base-url", server.url, "--prefilter", "schema",
                                 "--ontology", str(kg["onto"]), "--no-cache",
                                 "--concurrency", "1", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    total = len(KG_LINES)
    asked = len(server.calls()) - before
    assert asked == total - len(refuted)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["prefilter"] == {"name": "schema", "facts": total, "refuted": len(refuted),
                                    "sent_to_model": asked, "calls_saved": len(refuted)}
    text = " ".join(result.output.split())
    assert f"{len(refuted)} of {total} facts refuted by the rules" in text
    records = {json.loads(line)["fact_id"]: json.loads(line)
               for line in (out / "verdicts.jsonl").read_text().splitlines()}
    for fid, record in records.items():
        if fid in refuted:
            assert record["label"] == "F" and record["details"]["prefilter"] == "schema"
            assert record["details"]["reason"].startswith("refuted by the KG's rules before "
                                                          "any model call: ")
            assert record["method"] == "DKA" and record["attempts"] == 0
        else:
            assert record["label"] == "T" and record["attempts"] == 1  # the stub's answer
    info = json.loads((out / "run.json").read_text())
    assert info["settings"]["prefilter"]["kg"] == str(kg["kg"])  # the input's own types


@pytest.mark.parametrize(("args", "message"), [
    (["--prefilter", "rules"], "unknown pre-filter; known: schema"),
    (["--prefilter", "schema"], "needs an ontology"),
    (["--ontology", "ONTO"], "are the pre-filter's: add --prefilter schema"),
    (["--prefilter", "schema", "--ontology", "MISSING"], "ontology file not found"),
])
def test_prefilter_mistakes_are_one_line(kg: dict[str, Path], tmp_path: Path,
                                         openai_server: OpenAIStub, args: list[str],
                                         message: str) -> None:
    args = [str(kg["onto"]) if a == "ONTO" else str(tmp_path / "nope.ttl") if a == "MISSING"
            else a for a in args]
    before = len(openai_server.calls())
    result = runner.invoke(app, ["run", "--triples", str(kg["kg"]), "--model",
                                 "openai-compatible:stub-model", "--base-url",
                                 openai_server.url, *args, "--out", str(tmp_path / "o"),
                                 "--no-progress"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output
    assert len(openai_server.calls()) == before


def test_an_endpoint_input_gives_the_types(kg: dict[str, Path], tmp_path: Path,
                                           openai_server: OpenAIStub, virtuoso) -> None:
    from tests.support.virtuoso import load

    graph = "http://kgcheck.test/prefilter"
    load(virtuoso, kg["kg"], graph)
    refuted = _schema_refuted(kg, tmp_path)
    before = len(openai_server.calls())
    out = tmp_path / "sparql"
    result = runner.invoke(app, ["run", "--sparql", virtuoso.url, "--graph", graph,
                                 "--model", "openai-compatible:stub-model", "--base-url",
                                 openai_server.url, "--prefilter", "schema", "--ontology",
                                 str(kg["onto"]), "--no-cache", "--concurrency", "1",
                                 "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["prefilter"]["refuted"] == len(refuted)
    assert len(openai_server.calls()) - before == len(KG_LINES) - len(refuted)
    info = json.loads((out / "run.json").read_text())
    assert info["settings"]["prefilter"]["endpoint"] == virtuoso.url
    assert info["settings"]["prefilter"]["endpoint_graph"] == graph


def test_findings_that_decide_nothing_reach_the_prompt(kg: dict[str, Path], tmp_path: Path,
                                                        ) -> None:
    from langchain_core.messages import AIMessage

    from tests.support.scripted import SCRIPTED, register_scripted
    from tests.unit.test_any_dataset import PROMPTS, RecordingModel

    # A second birth date: owl:FunctionalProperty finds a conflict, and cannot say which.
    second = '<http://ex.org/ada> <http://ex.org/birthDate> "1816-01-01"^^' \
        '<http://www.w3.org/2001/XMLSchema#date> .'
    kg["kg"].write_text("\n".join([*KG_LINES, second]) + "\n")
    PROMPTS.clear()
    answers = iter([AIMessage(content="T")] * 50)
    register_scripted("rules-evidence", lambda: RecordingModel(messages=answers))
    try:
        out = tmp_path / "run"
        result = runner.invoke(app, ["run", "--triples", str(kg["kg"]), "--model",
                                     "scripted:rules-evidence", "--prefilter", "schema",
                                     "--ontology", str(kg["onto"]), "--no-cache",
                                     "--concurrency", "1", "--out", str(out), "--no-progress"])
    finally:
        SCRIPTED.pop("rules-evidence", None)
    assert result.exit_code == 0, result.output
    with_findings = [p for p in PROMPTS if "findings of the KG's own rules" in p]
    # Both birth dates, each naming the other; no other prompt carries findings.
    assert len(with_findings) == 2
    for prompt, other in zip(with_findings, ("1816-01-01", "1815-12-10"), strict=True):
        data, evidence = prompt.split("findings of the KG's own rules", 1)
        assert "owl:FunctionalProperty" in evidence and "one of them is wrong" in evidence
        assert other in evidence and other not in data
    summary = json.loads((out / "summary.json").read_text())
    assert len(PROMPTS) == summary["prefilter"]["sent_to_model"]


def test_a_dry_run_applies_the_prefilter(kg: dict[str, Path], tmp_path: Path,
                                         openai_server: OpenAIStub) -> None:
    import kgcheck

    refuted = _schema_refuted(kg, tmp_path)
    total = len(KG_LINES)
    before = len(openai_server.calls())
    args = ["run", "--triples", str(kg["kg"]), "--model", "openai-compatible:stub-model",
            "--base-url", openai_server.url, "--ontology", str(kg["onto"]), "--no-cache",
            "--concurrency", "1", "--out", str(tmp_path / "run"), "--no-progress"]
    dry = runner.invoke(app, [*args, "--prefilter", "schema", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    text = " ".join(dry.output.split())
    sent = total - len(refuted)
    assert f"total: {sent} calls (at most {sent})" in text
    assert (f"prefilter schema: {len(refuted)} of {total} facts refuted by the rules without "
            f"a model call, {len(refuted)} calls saved; {sent} go to the model") in text
    assert len(openai_server.calls()) == before and not (tmp_path / "run").exists()
    found = kgcheck.dry_run(triples=kg["kg"], model="openai-compatible:stub-model",
                            base_url=openai_server.url, prefilter="schema",
                            rules={"ontology": str(kg["onto"])}, out=tmp_path / "run")
    assert found.prefilter == {"name": "schema", "facts": total, "refuted": len(refuted),
                               "sent_to_model": sent, "calls_saved": len(refuted)}
    assert found.calls == sent
    # The run sends what the dry run counted.
    ran = runner.invoke(app, [*args, "--prefilter", "schema"])
    assert ran.exit_code == 0, ran.output
    assert len(openai_server.calls()) - before == found.calls


def test_a_dry_run_counts_the_findings_in_the_prompts(kg: dict[str, Path], tmp_path: Path,
                                                     openai_server: OpenAIStub) -> None:
    import kgcheck

    # A second birth date: both facts go to the model with the rules' findings.
    second = '<http://ex.org/ada> <http://ex.org/birthDate> "1816-01-01"^^' \
        '<http://www.w3.org/2001/XMLSchema#date> .'
    kg["kg"].write_text("\n".join([*KG_LINES, second]) + "\n")
    refuted = _schema_refuted(kg, tmp_path)
    every_id = [json.loads(line)["fact_id"]
                for line in (tmp_path / "schema" / "verdicts.jsonl").read_text().splitlines()]
    common = {"triples": kg["kg"], "model": "openai-compatible:stub-model",
              "base_url": openai_server.url, "out": tmp_path / "run"}
    everything = kgcheck.dry_run(**common)
    kept = [fid for fid in every_id if fid not in refuted]
    unscreened = kgcheck.dry_run(**common, ids=kept)
    assert unscreened.facts == len(kept) < everything.facts
    screened = kgcheck.dry_run(**common, prefilter="schema",
                               rules={"ontology": str(kg["onto"])})
    assert screened.prefilter is not None
    assert screened.prefilter["refuted"] == len(refuted)
    assert screened.calls == unscreened.calls
    # The same facts reach the model, two of them with the findings: more tokens in.
    assert screened.tokens_in > unscreened.tokens_in
