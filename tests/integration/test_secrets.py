"""Secrets: a search key and URL query credentials never reach files, console, logs or spans.

The end-to-end test runs ``kgcheck run`` in a subprocess (tracing to an in-memory exporter,
logging at DEBUG into a file) against a stub OpenAI-compatible server whose URL carries a
``?token=``, with ``--set search_api_key=...``; calls fail, so that error messages quoting
the URL are written too. Then it greps everything the run left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kgcheck.providers.secrets import (
    is_secret_name,
    redact_settings,
    redact_text,
    redact_url,
)
from tests.support.stubs import Behaviour, OpenAIStub

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-search-7c1e9a"
TOKEN = "tok-query-55b2f0"
PASSWORD = "pw-userinfo-913d"


def test_secret_names_are_whole_words_of_the_name() -> None:
    for name in ("search_api_key", "api_key", "token", "access_token", "X-API-Key",
                 "password", "client_secret", "Authorization", "sig", "apiKey"):
        assert is_secret_name(name), name
    for name in ("max_tokens", "top_k", "tokens_in", "monkey", "base_url", "keyword_weight"):
        assert not is_secret_name(name), name


def test_urls_lose_userinfo_and_credential_query_values() -> None:
    url = f"https://me:{PASSWORD}@llm.example:8000/v1?token={TOKEN}&model=x&api_key={KEY}"
    clean = redact_url(url)
    assert PASSWORD not in clean and TOKEN not in clean and KEY not in clean
    assert clean == "https://llm.example:8000/v1?token=***&model=x&api_key=***"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


def test_settings_and_messages_are_redacted() -> None:
    settings = redact_settings({"search_api_key": KEY, "max_tokens": 5, "unused_key": "",
                                "base_url": f"http://h:1/v1?token={TOKEN}"})
    assert settings == {"search_api_key": "***", "max_tokens": 5, "unused_key": "",
                        "base_url": "http://h:1/v1?token=***"}
    message = (f"cannot reach m at http://h:1/v1?token={TOKEN} (1 attempt); "
               f"--set search_api_key={KEY}; X-API-Key: {KEY}; KeyError: 'label'")
    clean = redact_text(message)
    assert TOKEN not in clean and KEY not in clean
    assert "KeyError: 'label'" in clean and "cannot reach m at http://h:1/v1?token=***" in clean


CHILD = """
import json, logging, sys
logging.basicConfig(level=logging.DEBUG, filename=sys.argv[2], force=True)
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from kgcheck.cli import app

try:
    app(args=sys.argv[3:], prog_name="kgcheck")
except SystemExit as exc:
    code = exc.code
finally:
    spans = [{"name": s.name, "attributes": {k: str(v) for k, v in s.attributes.items()},
              "events": [str(e.attributes) for e in s.events]}
             for s in exporter.get_finished_spans()]
    open(sys.argv[1], "w").write(json.dumps(spans))
"""


def test_no_secret_reaches_the_run_folder_console_logs_or_spans(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    spans_file, log_file, out_dir = tmp_path / "spans.json", tmp_path / "log.txt", tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENLIT_"))}
    env.update({"ANONYMIZED_TELEMETRY": "False", "PYTHONPATH": str(ROOT)})
    # The client puts the query before its own path, so the server answers 404: the sentence
    # and question steps fall back and the verdict call fails, each with a message that
    # quotes the server's URL, query and all.
    with OpenAIStub(Behaviour(answer='{"output": "yes"}')) as stub:
        proc = subprocess.run(
            [sys.executable, str(script), str(spans_file), str(log_file), "run",
             "--dataset", "yago", "--method", "rag", "--model", "openai-compatible:stub-model",
             "--base-url", f"{stub.url}?token={TOKEN}", "--set", f"search_api_key={KEY}",
             "--set", "max_retries=0", "--set", "timeout=5", "--limit", "3",
             "--concurrency", "1", "--trace", "--no-progress", "--out", str(out_dir)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert stub.calls(), "the run never reached the model server"
    assert spans_file.exists(), proc.stderr[-3000:]
    spans = json.loads(spans_file.read_text())
    assert spans, "no span was exported"
    verdicts = (out_dir / "verdicts.jsonl").read_text()
    assert "?token=***" in verdicts, verdicts[:2000]
    run_info = json.loads((out_dir / "run.json").read_text())
    assert run_info["settings"]["search_api_key"] == "***"
    assert "token=***" in run_info["settings"]["base_url"]
    places = {
        "stdout": proc.stdout, "stderr": proc.stderr, "log": log_file.read_text(),
        "spans": spans_file.read_text(),
        **{p.name: p.read_text() for p in out_dir.iterdir() if p.is_file()},
    }
    assert "http://127.0.0.1" in places["log"], "the log holds no request line to check"
    for where, text in places.items():
        assert KEY not in text, f"the search key leaked into {where}"
        assert TOKEN not in text, f"the URL token leaked into {where}"
