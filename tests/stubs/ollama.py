"""A stub Ollama server speaking Ollama's HTTP API on 127.0.0.1.

``POST /api/chat`` streams NDJSON chunks (``{"message": {...}, "done": false}``) and a final
``done`` chunk carrying ``done_reason``, durations, ``prompt_eval_count`` and ``eval_count``,
as Ollama does; with ``"stream": false`` it sends that final object with the whole message.
``GET /api/version`` answers like a server; ``GET /api/tags`` lists the models the stub
is given (``gemma2:9b`` by default), with ``models=None`` it answers 404 as an older
server or a proxy might.
Failures carry Ollama's ``{"error": ...}`` body (503 is what a busy Ollama sends). The
behaviour can also make it drip empty chunks forever, answer a non-JSON page, or end a
stream without its ``done`` chunk.
"""

from __future__ import annotations

import json
from typing import Any

from tests.stubs.base import Behaviour, StubHandler, StubServer, now_iso, pieces

VERSION = "0.12.6"
ERRORS = {
    400: "invalid options: num_predict",
    404: 'model "gemma2:9b" not found, try pulling it first',
    500: "llama runner process has terminated: exit status 2",
    503: "server busy, please try again.  maximum pending requests exceeded",
}


class OllamaHandler(StubHandler):
    """Routes of the Ollama API that chat clients use."""

    # The models /api/tags lists; None: the route is not there.
    models: tuple[str, ...] | None = ("gemma2:9b",)

    routes = {
        ("POST", "/api/chat"): "chat",
        ("GET", "/api/tags"): "tags",
        ("GET", "/api/version"): "version",
        ("GET", "/"): "root",
    }

    def root(self, body: Any) -> None:
        """Answer the liveness probe the way Ollama does."""
        data = b"Ollama is running"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def version(self, body: Any) -> None:
        """Report a server version."""
        self.send_json(200, {"version": VERSION})

    def tags(self, body: Any) -> None:
        """List the models the stub pretends to have pulled."""
        if self.models is None:
            self.send_json(404, {"error": "404 page not found"})
            return
        self.send_json(200, {"models": [{
            "name": name, "model": name, "modified_at": now_iso(),
            "size": 5443152417, "digest": "ff02c3702f32",
            "details": {"format": "gguf", "family": name.split(":")[0],
                        "parameter_size": "9.2B", "quantization_level": "Q4_0"},
        } for name in self.models]})

    def send_failure(self, status: int) -> None:
        """Send Ollama's error body."""
        self.send_json(status, {"error": ERRORS.get(status, f"status {status}")})

    def chat(self, body: Any) -> None:
        """Answer a chat request, streamed (the default) or as one JSON object."""
        if not isinstance(body, dict) or not body.get("model"):
            self.send_json(400, {"error": "model is required"})
            return
        if not self.model_call():
            return
        behaviour = self.shared.behaviour
        model = body["model"]
        if self.send_garbage():
            return
        final = self._final(model, behaviour)
        tokens = self.logprobs(body)
        if body.get("stream", True) is False:
            final["message"] = {"role": "assistant", "content": behaviour.answer_to(body)}
            if tokens is not None:
                final["logprobs"] = tokens
            self.send_json(200, final)
            return
        self.start_chunked("application/x-ndjson")
        empty = {"model": model, "created_at": now_iso(),
                 "message": {"role": "assistant", "content": ""}, "done": False}
        if self.drip_until_stopped(json.dumps(empty).encode() + b"\n"):
            return
        # Asked for log-probabilities, Ollama streams one token a chunk, each with its own.
        steps = ([(t["token"], [t]) for t in tokens] if tokens is not None else
                 [(piece, None) for piece in pieces(behaviour.answer_to(body),
                                                    behaviour.chunk_chars)])
        for piece, logprobs in steps:
            chunk = {"model": model, "created_at": now_iso(),
                     "message": {"role": "assistant", "content": piece}, "done": False}
            if logprobs is not None:
                chunk["logprobs"] = logprobs
            self.write_chunk(json.dumps(chunk).encode() + b"\n")
        if behaviour.truncate:
            # The stream ends cleanly at the HTTP level, but Ollama never said ``done``.
            self.end_chunked()
            return
        final["message"] = {"role": "assistant", "content": ""}
        self.write_chunk(json.dumps(final).encode() + b"\n")
        self.end_chunked()

    def logprobs(self, body: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Return Ollama's ``logprobs`` (a list of tokens) when the request asks for them."""
        tokens = self.shared.behaviour.logprobs
        if not body.get("logprobs") or tokens is None:
            return None
        top = int(body.get("top_logprobs") or 0)

        def entry(token: str, logprob: float) -> dict[str, Any]:
            return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

        return [{**entry(token, logprob),
                 "top_logprobs": [entry(t, lp) for t, lp in alternatives[:top]]}
                for token, logprob, alternatives in tokens]

    @staticmethod
    def _final(model: str, behaviour: Behaviour) -> dict[str, Any]:
        return {
            "model": model,
            "created_at": now_iso(),
            "done": True,
            "done_reason": "stop",
            "total_duration": 152_000_000,
            "load_duration": 12_000_000,
            "prompt_eval_count": behaviour.tokens_in,
            "prompt_eval_duration": 40_000_000,
            "eval_count": behaviour.tokens_out,
            "eval_duration": 100_000_000,
        }


class OllamaStub(StubServer):
    """A stub Ollama server; ``url`` is what ``OLLAMA_HOST`` or ``base_url`` takes."""

    handler = OllamaHandler

    def __init__(self, behaviour: Behaviour | None = None, *,
                 models: tuple[str, ...] | None = ("gemma2:9b",)) -> None:
        super().__init__(behaviour)
        self.handler = type("OllamaModels", (OllamaHandler,), {"models": models})
