"""Reasons read apart from the label, bad answers counted, and the conversation kept."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.facts import Fact
from kgcheck.graphs import explain
from kgcheck.graphs.registry import get_strategy
from tests.support.stubs import Behaviour, OpenAIStub

FACT = Fact(id="x1", dataset="YAGO", subject="Jaya_Bachchan", predicate="isMarriedTo",
            object="Amitabh_Bachchan")
runner = CliRunner()


async def _verdict(name: str, model: str, **settings) -> dict:
    strategy = get_strategy(name)
    out = await strategy.compile().ainvoke({"fact": FACT.as_input()},
                                           context=strategy.make_context(model=model, **settings),
                                           config={"recursion_limit": 40})
    return out["verdict"]


@pytest.mark.parametrize(("answer", "label", "reason", "problems"), [
    ("T\nReason: They married in 1973.", "T", "They married in 1973.", []),
    ("**Answer**: F\n**Reason**: Amitabh married Jaya, so the fact is true... no, false.", "F",
     "Amitabh married Jaya, so the fact is true... no, false.", []),
    # The label only inside the reason: never guessed from it.
    ("Reason: they are married, so T", "NA", "they are married, so T", [explain.SWALLOWED]),
    ("T", "T", None, [explain.NO_REASON]),
])
async def test_reason_is_read_apart_from_the_label(scripted, answer, label, reason, problems):
    verdict = await _verdict("dka", scripted(f"r{len(answer)}", [answer]), reasons=True)
    assert (verdict["label"], verdict["rationale"]) == (label, reason)
    assert verdict["answer_problems"] == problems
    assert "Reason:" in verdict["conversation"][0]["content"]  # the request, in the prompt


async def test_without_the_setting_prompt_and_parse_are_the_study_s(scripted):
    verdict = await _verdict("dka", scripted("plain", ["T\nReason: x"]))
    assert verdict["label"] == "T" and verdict["rationale"] is None
    assert "Reason:" not in verdict["conversation"][0]["content"]


async def test_giv_with_reasons_complies_and_keeps_every_turn(scripted):
    model = scripted("giv-r", ["I think it holds.", "T\nReason: A well-known couple."])
    verdict = await _verdict("giv-z", model, reasons=True)
    assert verdict["label"] == "T" and verdict["attempts"] == 2
    assert verdict["rationale"] == "A well-known couple."
    assert [t["role"] for t in verdict["conversation"]] == [
        "system", "user", "assistant", "user", "assistant"]
    assert "broke the guidelines" in verdict["conversation"][3]["content"]


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIStub]:
    with OpenAIStub(Behaviour(answer="F\nReason: Not married.")) as stub:
        yield stub


async def test_conversation_is_exactly_what_the_server_got(server, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    verdict = await _verdict("dka", "openai-compatible:stub-model", base_url=server.url,
                             reasons=True, max_retries=0)
    sent = server.calls()[-1].body["messages"]
    assert [{"role": t["role"], "content": t["content"]}
            for t in verdict["conversation"][:-1]] == sent
    assert verdict["conversation"][-1] == {"role": "assistant",
                                           "content": "F\nReason: Not married."}


def test_show_prints_the_verdict_and_its_conversation(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--dataset", "yago", "--limit", "2", "--out", str(out),
                                 "--no-progress", "--method", "giv-z"])
    assert result.exit_code == 0, result.output
    record = json.loads((out / "verdicts.jsonl").read_text().splitlines()[0])
    shown = runner.invoke(app, ["show", str(out), record["fact_id"]])
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert f"fact {record['fact_id']}" in text and "conversation" in text
    assert record["conversation"][0]["content"].splitlines()[0] in text
    assert record["raw"].strip() in text
    as_json = runner.invoke(app, ["show", str(out), record["fact_id"], "--json"])
    assert json.loads(as_json.output)["conversation"] == record["conversation"]
    missing = runner.invoke(app, ["show", str(out), "no-such-fact"])
    assert missing.exit_code == 2 and "no verdict of fact 'no-such-fact'" in missing.output


@pytest.mark.parametrize("name", ["dka", "dka-sc", "giv-z", "giv-f", "rag"])
def test_studio_sees_the_explained_fields_in_the_output_schema(name):
    schema = get_strategy(name).compile().get_output_jsonschema()
    verdict = schema["properties"]["verdict"]
    if "$ref" in verdict:
        verdict = schema["$defs"][verdict["$ref"].rsplit("/", 1)[-1]]
    assert {"confidence", "confidence_source", "rationale", "citations", "correction",
            "conversation", "answer_problems"} <= set(verdict["properties"])
    assert "NEI" in json.dumps(verdict["properties"]["label"])


def test_a_cache_written_before_logprobs_is_upgraded(tmp_path):
    import sqlite3

    from kgcheck.providers.cache import AnswerCache, CachedAnswer

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, model TEXT NOT NULL, text TEXT "
               "NOT NULL, tokens_in INTEGER, tokens_out INTEGER, seconds REAL, created REAL "
               "NOT NULL)")
    db.execute("INSERT INTO answers VALUES ('k0', 'm', 'T', 1, 1, 0.1, 0)")
    db.commit()
    db.close()
    cache = AnswerCache(path)
    assert cache.get("k0") == CachedAnswer("T", 1, 1, 0.1, None)
    tokens = [{"token": "F", "logprob": -0.1, "top": [["F", -0.1], ["T", -2.0]]}]
    cache.put("k1", "m", CachedAnswer("F", 2, 1, 0.2, tokens))
    assert cache.get("k1") == CachedAnswer("F", 2, 1, 0.2, tokens)
    cache.close()


def test_the_api_returns_explained_verdicts(scripted):
    import kgcheck

    facts = kgcheck.load_dataset("yago")[:2]
    model = scripted("api-explained", ["T\nReason: Known couple.", "NEI"])
    verdicts = kgcheck.check(facts, "dka", model, concurrency=1, cache=False, reasons=True,
                             abstain=True)
    assert [v.label for v in verdicts] == ["T", "NEI"]
    assert verdicts[0].rationale == "Known couple."
    assert verdicts[1].answer_problems == [explain.NO_REASON]
    assert verdicts[0].conversation[-1]["content"] == "T\nReason: Known couple."


def test_a_run_folder_older_than_the_explanation_settings_resumes(tmp_path):
    from kgcheck.runs.runner import ADDED_SETTINGS, RunInfo, resume_conflicts

    settings = {"prompt": "dka.txt", "parser": "strict", "temperature": 0.75}
    old = {"dataset": "YAGO", "strategy": "dka", "method": "DKA", "models": ["m"],
           "judge": None, "settings": settings, "prompts": {}}
    same = RunInfo("YAGO", "dka", "DKA", ["m"], settings={**settings, **ADDED_SETTINGS})
    assert resume_conflicts(old, same) == []
    # Asking for something the stored run did not ask for is another run.
    asks = RunInfo("YAGO", "dka", "DKA", ["m"],
                   settings={**settings, **ADDED_SETTINGS, "reasons": True})
    assert resume_conflicts(old, asks) == ["setting reasons (False then, True now)"]
