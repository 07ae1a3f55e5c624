"""Run a page's marked code blocks in order, in one process: ``python -m tests.docs_blocks FILE``.

FILE is a JSON list of blocks (``page``, ``line``, ``lang``, ``code``, ``file``), as
tests/test_docs.py extracts them. The current folder is the page's work folder. ``file``
blocks are written there; ``python`` blocks are executed as ``__main__`` scripts;
``bash`` blocks must hold ``kgcheck`` commands only (comments and ``\\`` continuations
allowed), each run through the Typer app as the console script runs it. One process per
page pays the imports once, which keeps the documentation tests fast.

Exit status 0 when every block succeeded; else 1, with the failing block named on stderr.
"""

from __future__ import annotations

import io
import json
import shlex
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any


def commands(code: str) -> list[list[str]]:
    """Split a shell block into its commands' words (comments and continuations removed)."""
    found = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            found.append(words)
    return found


def run_command(words: list[str]) -> tuple[int, str]:
    """Run one ``kgcheck ...`` command in this process; return its exit status and output."""
    from kgcheck.cli import app

    if words[0] != "kgcheck":
        return 2, f"only kgcheck commands run in marked bash blocks, not {words[0]!r}"
    # A text stream with a byte buffer beneath, as the console's (exports write bytes to it).
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    status = 0
    with redirect_stdout(out), redirect_stderr(out):
        try:
            app(words[1:], prog_name="kgcheck")
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # a traceback is a failure of the page's example
            status, _ = 1, out.write(traceback.format_exc())
    out.flush()
    return status, raw.getvalue().decode("utf-8", errors="replace")


def run_block(block: dict[str, Any]) -> str | None:
    """Run or write one block; return what went wrong, or None."""
    if block["file"]:
        target = Path(block["file"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block["code"], encoding="utf-8")
        return None
    if block["lang"] == "python":
        try:
            exec(compile(block["code"], f"{block['page']}:{block['line']}", "exec"),
                 {"__name__": "__main__"})
        except SystemExit as exc:
            if exc.code not in (0, None):
                return f"exited {exc.code}"
        except Exception:
            return traceback.format_exc()
        return None
    for words in commands(block["code"]):
        status, output = run_command(words)
        if status != 0:
            return f"`{shlex.join(words)}` exited {status}:\n{output[-3000:]}"
    return None


def main() -> None:
    """Run the blocks of the file named on the command line; exit 1 on the first failure."""
    blocks = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    for block in blocks:
        problem = run_block(block)
        if problem:
            print(f"{block['page']}, line {block['line']}:\n{block['code']}\n{problem}",
                  file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
