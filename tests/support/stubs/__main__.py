"""Serve a stub model server in the foreground: ``python -m tests.support.stubs ollama --answer T``."""

from __future__ import annotations

import argparse
import sys

from tests.support.stubs import AzureStub, Behaviour, OllamaStub, OpenAIStub
from tests.support.stubs.azure import API_VERSION, KEY
from tests.support.stubs.base import serve_in_foreground


def main() -> None:
    """Start the stub named on the command line and print its URL until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.stubs")
    parser.add_argument("kind", choices=["ollama", "openai", "azure"])
    parser.add_argument("--answer", default="T", help="the text every call answers")
    parser.add_argument("--fail", type=int, default=0, help="fail this many calls first")
    parser.add_argument("--status", type=int, default=503, help="status of those failures")
    parser.add_argument("--hang", action="store_true", help="never answer")
    parser.add_argument("--delay", type=float, default=0.0,
                        help="seconds each model call waits before its answer")
    parser.add_argument("--models", default="gemma2:9b",
                        help="ollama: the models /api/tags lists, comma-separated")
    args = parser.parse_args()
    behaviour = Behaviour(answer=args.answer, fail_times=args.fail, fail_status=args.status,
                          hang=args.hang, delay=args.delay)
    kinds = {"ollama": OllamaStub, "openai": OpenAIStub, "azure": AzureStub}
    if args.kind == "azure":
        # On stderr: standard output's first line is the URL, for the process reading it.
        print(f"set AZURE_OPENAI_ENDPOINT=<the URL below>, AZURE_OPENAI_API_KEY={KEY}, "
              f"OPENAI_API_VERSION={API_VERSION}; deployment: gpt-4o-mini", file=sys.stderr,
              flush=True)
    if args.kind == "ollama":
        models = tuple(m.strip() for m in args.models.split(",") if m.strip())
        serve_in_foreground(OllamaStub(behaviour, models=models))
    else:
        serve_in_foreground(kinds[args.kind](behaviour))


if __name__ == "__main__":
    main()
