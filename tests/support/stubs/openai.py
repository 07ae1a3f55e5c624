"""A stub OpenAI-compatible server: ``/v1/chat/completions`` as JSON or as an SSE stream.

A JSON reply is a ``chat.completion`` with ``usage``; with ``"stream": true`` the stub
sends ``chat.completion.chunk`` events, a last chunk with ``finish_reason``, a usage chunk
(empty ``choices``) when ``stream_options.include_usage`` is set, then ``data: [DONE]``.
Failures carry OpenAI's ``{"error": {"message", "type", ...}}`` body, and, when the
behaviour says so, the ``retry-after-ms`` header OpenAI sends.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from tests.support.stubs.base import StubHandler, StubServer, pieces

ERRORS = {
    404: ("The model `stub-model` does not exist or you do not have access to it.",
          "invalid_request_error"),
    500: ("The server had an error while processing your request. Sorry about that!",
          "server_error"),
    503: ("The server is overloaded or not ready yet.", "server_error"),
}


class OpenAIHandler(StubHandler):
    """Routes of the OpenAI API that chat clients use."""

    routes = {
        ("POST", "/v1/chat/completions"): "completions",
        ("GET", "/v1/models"): "models",
    }

    def models(self, body: Any) -> None:
        """List one model, as vLLM and llama.cpp do."""
        self.send_json(200, {"object": "list", "data": [
            {"id": "stub-model", "object": "model", "created": int(time.time()),
             "owned_by": "stub"},
        ]})

    def send_failure(self, status: int) -> None:
        """Send OpenAI's error body, with ``retry-after-ms`` when configured."""
        message, kind = ERRORS.get(status, (f"status {status}", "server_error"))
        retry_after = self.shared.behaviour.retry_after_ms
        headers = {"retry-after-ms": str(retry_after)} if retry_after is not None else None
        self.send_json(status, {"error": {"message": message, "type": kind, "param": None,
                                          "code": None}}, headers)

    def logprobs(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """Return OpenAI's ``choices[].logprobs`` when the request asks for them."""
        tokens = self.shared.behaviour.logprobs
        if not body.get("logprobs") or tokens is None:
            return None
        top = int(body.get("top_logprobs") or 0)

        def entry(token: str, logprob: float) -> dict[str, Any]:
            return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

        return {"content": [{**entry(token, logprob),
                             "top_logprobs": [entry(t, lp) for t, lp in alternatives[:top]]}
                            for token, logprob, alternatives in tokens],
                "refusal": None}

    def completions(self, body: Any) -> None:
        """Answer a chat completion request."""
        if not isinstance(body, dict) or not body.get("messages"):
            self.send_json(400, {"error": {"message": "'messages' is a required property",
                                           "type": "invalid_request_error",
                                           "param": "messages", "code": None}})
            return
        if not self.model_call():
            return
        behaviour = self.shared.behaviour
        if self.send_garbage():
            return
        ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        model = body.get("model", "stub-model")
        usage = {"prompt_tokens": behaviour.tokens_in,
                 "completion_tokens": behaviour.tokens_out,
                 "total_tokens": behaviour.tokens_in + behaviour.tokens_out}
        if not body.get("stream"):
            self.send_json(200, {
                "id": ident, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant",
                                                     "content": behaviour.answer_to(body),
                                                     "refusal": None},
                             "logprobs": self.logprobs(body), "finish_reason": "stop"}],
                "usage": usage, "system_fingerprint": None,
            })
            return

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            return {"id": ident, "object": "chat.completion.chunk", "created": created,
                    "model": model, "system_fingerprint": None,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                 "finish_reason": finish}]}

        events = [chunk({"role": "assistant", "content": ""}, None)]
        events += [chunk({"content": p}, None)
                   for p in pieces(behaviour.answer_to(body), behaviour.chunk_chars)]
        events.append(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({"id": ident, "object": "chat.completion.chunk", "created": created,
                           "model": model, "choices": [], "usage": usage})
        self.start_chunked("text/event-stream; charset=utf-8")
        if self.drip_until_stopped(b"data: " + json.dumps(events[0]).encode() + b"\n\n"):
            return
        if behaviour.truncate:
            events = [e for e in events
                      if e.get("choices") and e["choices"][0]["finish_reason"] is None]
            for event in events:
                self.write_chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.end_chunked()
            return
        for event in events:
            self.write_chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
        self.write_chunk(b"data: [DONE]\n\n")
        self.end_chunked()


class OpenAIStub(StubServer):
    """A stub OpenAI-compatible server; ``url`` ends in ``/v1`` like a client's base URL."""

    handler = OpenAIHandler
    prefix = "/v1"
