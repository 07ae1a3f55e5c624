"""Run pages' marked code blocks: ``python -m tests.support.docs_blocks PLAN PARALLEL``.

PLAN is a JSON list of pages, each ``blocks`` (``page``, ``line``, ``lang``, ``code``,
``file``, as tests/e2e/test_docs.py extracts them), ``cwd`` (the page's work folder), ``env``
(its environment) and ``errors`` (a file for what went wrong). ``file`` blocks are written
into the work folder; ``python`` blocks are executed as ``__main__`` scripts; ``bash``
blocks must hold ``kgcheck`` commands only (comments and ``\\`` continuations allowed), each
run through the Typer app as the console script runs it.

The process imports kgcheck once, then forks one child per page (PARALLEL at a time), which
runs that page's blocks in order in its own folder and environment: a page starts without
paying the imports again, which keeps the documentation tests fast. Prints a JSON object of
each page's exit status (0 when every block succeeded; else 1, the failing block named in
its ``errors`` file).
"""

from __future__ import annotations

import io
import json
import os
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


def run_page(page: dict[str, Any]) -> int:
    """Run one page's blocks in its folder and environment; 1 on the first failure."""
    os.chdir(page["cwd"])
    os.environ.clear()
    os.environ.update(page["env"])
    for block in page["blocks"]:
        problem = run_block(block)
        if problem:
            Path(page["errors"]).write_text(
                f"{block['page']}, line {block['line']}:\n{block['code']}\n{problem}",
                encoding="utf-8")
            return 1
    return 0


def preload() -> None:
    """Import what every page uses, once, before the pages fork."""
    import kgcheck
    from kgcheck.cli import app  # noqa: F401 - imported to be inherited by the children

    kgcheck.strategies()  # the registry imports every built-in strategy's graph


def main() -> None:
    """Run the plan's pages, PARALLEL forked children at a time; print their statuses."""
    pages = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    parallel = int(sys.argv[2])
    preload()
    running: dict[int, int] = {}
    statuses: dict[int, int] = {}
    waiting = list(range(len(pages)))
    while waiting or running:
        while waiting and len(running) < parallel:
            index = waiting.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child: run the page, never return into the loop
                status = 1
                try:
                    status = run_page(pages[index])
                except BaseException:  # anything a page raises is that page's failure
                    Path(pages[index]["errors"]).write_text(traceback.format_exc())
                finally:
                    os._exit(status)
            running[pid] = index
        pid, code = os.wait()
        statuses[running.pop(pid)] = os.waitstatus_to_exitcode(code)
    print(json.dumps({str(i): statuses[i] for i in sorted(statuses)}))


if __name__ == "__main__":
    main()
