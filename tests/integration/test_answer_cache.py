"""The answer cache: a second identical run makes no model calls; draws stay independent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

import kgcheck
from kgcheck.providers.cache import AnswerCache, CacheWarning, answer_key, use_cache
from tests.conftest import ROOT
from tests.support.stubs import Behaviour, OpenAIStub

FACTS = [{"id": str(n), "subject": f"Person_{n}", "predicate": "bornIn", "object": "Paris"}
         for n in range(1, 6)]


@pytest.fixture
def server(no_openai_env: None) -> Iterator[OpenAIStub]:
    with OpenAIStub(Behaviour(answer="T", tokens_in=30, tokens_out=1)) as stub:
        yield stub


def run(server: OpenAIStub, out: Path, **kwargs) -> dict:
    result = kgcheck.run(facts=FACTS, strategy=kwargs.pop("strategy", "dka"),
                         model="openai-compatible:stub-model", out=out,
                         settings={"base_url": server.url, **kwargs.pop("settings", {})},
                         **kwargs)
    return result.summary


def test_keys_change_with_everything_that_shapes_an_answer() -> None:
    messages = [SystemMessage("Answer T or F."), HumanMessage("Paris is in France.")]
    base = answer_key("ollama:gemma2:9b", messages, {"temperature": 0.75, "top_k": 40})
    assert base == answer_key("ollama:gemma2:9b", list(messages),
                              {"temperature": 0.75, "top_k": 40, "timeout": 5})
    others = [
        answer_key("ollama:llama3.1:8b", messages, {"temperature": 0.75, "top_k": 40}),
        answer_key("ollama:gemma2:9b", messages[1:], {"temperature": 0.75, "top_k": 40}),
        answer_key("ollama:gemma2:9b", messages, {"temperature": 0.0, "top_k": 40}),
        answer_key("ollama:gemma2:9b", messages, {"temperature": 0.75, "top_k": 40}, draw=1),
    ]
    assert base not in others and len(set(others)) == len(others)


def test_a_key_of_an_older_request_format_is_never_served(monkeypatch) -> None:
    from kgcheck.providers import cache

    messages = [HumanMessage("Paris is in France.")]
    now = answer_key("local:smollm2-135m", messages, {"constraint": "verdict"})
    monkeypatch.setattr(cache, "KEY_VERSION", cache.KEY_VERSION - 1)
    assert answer_key("local:smollm2-135m", messages, {"constraint": "verdict"}) != now


def test_a_local_models_key_says_whether_llama_cpp_reused_a_prefix() -> None:
    messages = [HumanMessage("Paris is in France.")]
    keys = {reuse: answer_key("local:smollm2-135m", messages,
                              {"temperature": 0.0, "local_prefix_reuse": reuse})
            for reuse in (True, False)}
    assert keys[True] != keys[False]
    # The setting shapes no other provider's answer: their keys stay as they were.
    assert answer_key("ollama:gemma2:9b", messages, {"temperature": 0.0}) == answer_key(
        "ollama:gemma2:9b", messages, {"temperature": 0.0, "local_prefix_reuse": False})


def test_a_second_identical_run_makes_no_model_calls(server: OpenAIStub,
                                                     tmp_path: Path) -> None:
    first = run(server, tmp_path / "a")
    calls = len(server.calls())
    assert calls == len(FACTS)
    assert first["cache"]["hits"] == 0 and first["cache"]["misses"] == len(FACTS)

    second = run(server, tmp_path / "b")
    assert len(server.calls()) == calls, "the second run asked the server again"
    assert second["cache"]["hits"] == len(FACTS) and second["cache"]["misses"] == 0
    assert second["verdicts"] == first["verdicts"] == {"T": 5, "F": 0, "NA": 0, "NEI": 0}
    # Cached answers keep their token counts (what the calls cost when they were made).
    assert second["tokens_in"] == first["tokens_in"] == 30 * len(FACTS)


def test_no_cache_asks_again(server: OpenAIStub, tmp_path: Path) -> None:
    run(server, tmp_path / "a")
    summary = run(server, tmp_path / "b", cache=False)
    assert len(server.calls()) == 2 * len(FACTS)
    assert "cache" not in summary


def test_other_sampling_settings_are_other_calls(server: OpenAIStub, tmp_path: Path) -> None:
    run(server, tmp_path / "a")
    run(server, tmp_path / "b", settings={"temperature": 0.1})
    assert len(server.calls()) == 2 * len(FACTS)


def test_self_consistency_draws_are_cached_one_by_one(server: OpenAIStub,
                                                      tmp_path: Path) -> None:
    first = run(server, tmp_path / "a", strategy="dka-sc", settings={"samples": 3})
    # Three independent draws per fact, though the messages are the same.
    assert len(server.calls()) == 3 * len(FACTS)
    assert first["cache"]["misses"] == 3 * len(FACTS)
    second = run(server, tmp_path / "b", strategy="dka-sc", settings={"samples": 3})
    assert len(server.calls()) == 3 * len(FACTS)
    assert second["cache"]["hits"] == 3 * len(FACTS)


def test_replay_is_not_cached(tmp_path: Path) -> None:
    facts = kgcheck.load_dataset("yago")[:3]
    summary = kgcheck.run(facts=facts, strategy="dka", model="replay:gemma2:9b",
                          out=tmp_path / "r").summary
    assert summary["cache"]["hits"] == 0 and summary["cache"]["misses"] == 0


def test_an_explicit_cache_file_is_used(server: OpenAIStub, tmp_path: Path) -> None:
    path = tmp_path / "mine.sqlite"
    summary = run(server, tmp_path / "a", cache=path)
    assert summary["cache"]["path"] == str(path)
    store = AnswerCache(path)
    try:
        assert store.stats()["path"] == str(path)
        assert store._db is not None
        assert store._db.execute("SELECT count(*) FROM answers").fetchone()[0] == len(FACTS)
    finally:
        store.close()


def test_a_corrupt_cache_is_set_aside_and_the_run_goes_on(server: OpenAIStub,
                                                          tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.warns(CacheWarning, match="not a readable cache.*moved it to"):
        summary = run(server, tmp_path / "a", cache=path)
    assert summary["verdicts"]["T"] == len(FACTS)
    assert list(tmp_path.glob("answers.sqlite.corrupt-*")), "the corrupt file was not kept"


def test_the_cli_reports_hits_and_honours_no_cache(server: OpenAIStub, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from kgcheck.cli import app

    triples = tmp_path / "facts.jsonl"
    triples.write_text("".join(json.dumps(f) + "\n" for f in FACTS), encoding="utf-8")
    args = ["run", "--triples", str(triples), "--model", "openai-compatible:stub-model",
            "--base-url", server.url, "--no-progress"]
    cli = CliRunner()
    first = cli.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    second = cli.invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert second.exit_code == 0, second.output
    assert ("answer cache: 5 of 5 verdicts came from the cache, not from a model call now"
            in second.output)
    assert "5 answers reused, 0 calls made" in second.output
    assert len(server.calls()) == len(FACTS)
    third = cli.invoke(app, [*args, "--out", str(tmp_path / "c"), "--no-cache"])
    assert third.exit_code == 0, third.output
    assert len(server.calls()) == 2 * len(FACTS)
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["cache"]["hits"] == len(FACTS)


def test_cached_verdicts_say_so_and_keep_the_original_calls_time(
        no_openai_env: None, tmp_path: Path) -> None:
    with OpenAIStub(Behaviour(answer="T", delay=0.05)) as stub:
        first = kgcheck.run(facts=FACTS, strategy="dka", model="openai-compatible:stub-model",
                            out=tmp_path / "a", settings={"base_url": stub.url})
        second = kgcheck.run(facts=FACTS, strategy="dka", model="openai-compatible:stub-model",
                             out=tmp_path / "b", settings={"base_url": stub.url})
    live = {v["fact_id"]: v for v in first.records}
    served = {v["fact_id"]: v for v in second.records}
    assert not any(v["cached"] for v in live.values())
    assert first.summary["cached_verdicts"] == 0
    assert all(v["cached"] for v in served.values())
    assert second.summary["cached_verdicts"] == len(FACTS)
    # The time is the original call's (the stub waited 0.05 s), not a lookup's 0.0.
    times = {k: v["seconds"] for k, v in live.items()}
    assert min(times.values()) >= 0.05
    assert {k: v["seconds"] for k, v in served.items()} == times
    # The FactCheck export of the cached answers carries that time too.
    out = kgcheck.export(tmp_path / "b", "factcheck", tmp_path / "fc.json")
    assert out.path is not None
    rows = {r["id"]: r for r in json.loads(out.path.read_text(encoding="utf-8"))}
    assert {k: r["response_time"] for k, r in rows.items()} == times


def test_an_entry_stored_without_a_time_is_still_served(server: OpenAIStub,
                                                        tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    run(server, tmp_path / "a", cache=path)
    store = AnswerCache(path)
    assert store._db is not None
    store._db.execute("UPDATE answers SET seconds = NULL")
    store.close()
    second = kgcheck.run(facts=FACTS, strategy="dka", model="openai-compatible:stub-model",
                         out=tmp_path / "b", cache=path, settings={"base_url": server.url})
    assert len(server.calls()) == len(FACTS)
    assert [(v["label"], v["cached"], v["seconds"]) for v in second.records] == [
        ("T", True, 0.0)] * len(FACTS)


def test_the_demos_live_step_asks_the_model_every_time() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    demo = makefile[makefile.index("\ndemo:"):].split("\n\n")[0]
    live = [line for line in demo.splitlines() if "kgcheck run" in line and "local:" in line]
    # Its closing words say the verdicts came from the llama.cpp server: never the cache.
    assert live and all("--no-cache" in line.split() for line in live), live
    assert "llama.cpp server" in demo


def test_use_cache_none_turns_caching_off() -> None:
    with use_cache(None) as cache:
        assert cache is None


def test_runs_one_after_another_send_each_call_once(server: OpenAIStub,
                                                    tmp_path: Path) -> None:
    # Each run has its own event loop: pooled connections of the last one must not be reused.
    for n in range(3):
        run(server, tmp_path / str(n), cache=False)
    calls = server.calls()
    assert len(calls) == 3 * len(FACTS)
    assert {c.headers.get("x-stainless-retry-count") for c in calls} == {"0"}
