"""Model replies through the capped transport: compressed replies read, gzip bombs refused.

A small server on 127.0.0.1 answers the OpenAI chat completions and Ollama chat protocols
with gzip-compressed bodies, or with a gzip bomb (300 MB of zeros in about 300 KB); the same
replies come through a forward proxy set in HTTP_PROXY (tests/support/stubs/proxy.py).
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kgcheck.failures import Failure, classify
from kgcheck.providers import ModelSettings, resolve_model
from kgcheck.providers.transports import MAX_REPLY_BYTES, ModelReplyError
from tests.support.stubs.bodies import gzip_bomb, send_body
from tests.support.stubs.proxy import ForwardProxy

COMPLETION = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
              "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": "T"}}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
OLLAMA_LINES = [
    {"model": "m", "created_at": "2024-01-01T00:00:00Z",
     "message": {"role": "assistant", "content": "T"}, "done": False},
    {"model": "m", "created_at": "2024-01-01T00:00:00Z",
     "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
     "prompt_eval_count": 3, "eval_count": 1},
]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.bomb:
            body = self.server.bomb
        elif self.path.endswith("/chat/completions"):
            body = gzip.compress(json.dumps(COMPLETION).encode())
        else:
            body = gzip.compress(b"".join(json.dumps(line).encode() + b"\n"
                                          for line in OLLAMA_LINES))
        send_body(self, 200, body, "application/json" if "completions" in self.path
                  else "application/x-ndjson", encoded="gzip")


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return gzip_bomb(300)


@pytest.fixture
def server() -> Iterator[Any]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.bomb = b""
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _model(spec: str, url: str) -> Any:
    return resolve_model(spec, ModelSettings(base_url=url, max_retries=0, timeout=30.0,
                                             retry_backoff=0.01))


@pytest.mark.parametrize(("spec", "path"), [("openai-compatible:m", "/v1"), ("ollama:m", "")])
async def test_a_compressed_reply_is_read(server: Any, spec: str, path: str) -> None:
    reply = await _model(spec, server.url + path).ainvoke("Is Paris in France?")
    assert reply.content == "T"


@pytest.mark.parametrize(("spec", "path"), [("openai-compatible:m", "/v1"), ("ollama:m", "")])
def test_a_gzip_bomb_reply_is_refused_at_the_cap(server: Any, bomb: bytes, spec: str,
                                                 path: str) -> None:
    import asyncio

    server.bomb = bomb
    model = _model(spec, server.url + path)
    tracemalloc.start()
    try:
        with pytest.raises(ModelReplyError) as refused:
            asyncio.run(model.ainvoke("Is Paris in France?"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"{spec} at " in str(refused.value)
    assert f"sent a reply larger than {MAX_REPLY_BYTES:,} bytes (decoded)" in str(refused.value)
    assert classify(refused.value) is Failure.BAD_REPLY
    # The cap and a few raw chunks, not the 300 MB the reply decodes to.
    assert peak < 3 * MAX_REPLY_BYTES, f"peak {peak:,} bytes"


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ForwardProxy]:
    """A forward proxy set as HTTP_PROXY, with no NO_PROXY: loopback goes through it too."""
    forward = ForwardProxy().start()
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                 "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", forward.url)
    yield forward
    forward.stop()


@pytest.mark.parametrize(("spec", "path"), [("openai-compatible:m", "/v1"), ("ollama:m", "")])
async def test_model_calls_go_through_the_proxy_of_the_environment(
        server: Any, proxy: ForwardProxy, spec: str, path: str) -> None:
    reply = await _model(spec, server.url + path).ainvoke("Is Paris in France?")
    assert reply.content == "T"
    assert [url for url in proxy.forwarded if url.startswith(server.url)], proxy.forwarded


@pytest.mark.parametrize(("spec", "path"), [("openai-compatible:m", "/v1"), ("ollama:m", "")])
def test_a_gzip_bomb_through_the_proxy_is_refused_at_the_cap(
        server: Any, proxy: ForwardProxy, bomb: bytes, spec: str, path: str) -> None:
    import asyncio

    server.bomb = bomb
    with pytest.raises(ModelReplyError) as refused:
        asyncio.run(_model(spec, server.url + path).ainvoke("Is Paris in France?"))
    assert f"sent a reply larger than {MAX_REPLY_BYTES:,} bytes (decoded)" in str(refused.value)
    assert proxy.forwarded, "the reply did not come through the proxy"


def test_no_proxy_hosts_are_reached_directly(server: Any, proxy: ForwardProxy,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    reply = _model("ollama:m", server.url).invoke("Is Paris in France?")
    assert reply.content == "T"
    assert proxy.forwarded == []


async def test_proxy_credentials_are_sent_to_the_proxy_and_never_said(
        server: Any, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    host = proxy.url.removeprefix("http://")
    monkeypatch.setenv("HTTP_PROXY", f"http://kg-user:s3cret-word@{host}")
    reply = await _model("openai-compatible:m", server.url + "/v1").ainvoke("Is Paris in France?")
    assert reply.content == "T"
    expected = "Basic " + base64.b64encode(b"kg-user:s3cret-word").decode()
    assert proxy.authorizations[-1] == expected
    proxy.stop()  # now nothing answers at the proxy: the failure must not say the password
    with pytest.raises(Exception) as failed:
        await _model("ollama:m", server.url).ainvoke("Is Paris in France?")
    assert "s3cret-word" not in str(failed.value)
