"""``kgcheck show RUN FACT_ID``: one verdict explained, with the exact conversation behind it.

Printing only: the verdict is ``kgcheck.api.explain``'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from kgcheck.cli.app import Command, app, console, user_errors


def _line(name: str, value: Any) -> None:
    if value not in (None, "", [], {}):
        console.print(f"[bold]{name}:[/] {value}", highlight=False, markup=True, soft_wrap=True)


def _print_verdict(record: dict[str, Any]) -> None:
    from rich.markup import escape

    console.print(f"[bold]fact {escape(str(record['fact_id']))}[/]: "
                  f"{escape(str(record.get('subject')))} | {escape(str(record.get('predicate')))}"
                  f" | {escape(str(record.get('object')))}", highlight=False)
    _line("verdict", f"{record.get('label')} ({record.get('method')}, "
          f"{escape(str(record.get('model')))})")
    if record.get("confidence") is not None:
        _line("confidence", f"{record['confidence']:.3f} that it is true "
              f"(from {record.get('confidence_source')})")
    _line("gold", record.get("gold"))
    _line("error", escape(str(record["error"])) if record.get("error") else None)
    _line("reason", escape(str(record["rationale"])) if record.get("rationale") else None)
    for cited in record.get("citations") or []:
        _line(f"cited {cited.get('passage')}", escape(f"{cited.get('url') or cited.get('doc_id')}"
                                                      f": {cited.get('text', '')[:200]}"))
    correction = record.get("correction")
    if correction:
        _line("suggested correction", escape(f"{correction['part']}: "
                                             f"{correction.get('current')!r} -> "
                                             f"{correction['value']!r}"))
    for problem in record.get("answer_problems") or []:
        _line("answer problem", escape(str(problem)))
    conversation = record.get("conversation") or []
    if not conversation:
        console.print("[dim]no conversation kept (run with transcript on)[/]", markup=True)
        return
    console.rule("conversation")
    for turn in conversation:
        where = ", ".join(f"{k} {turn[k]}" for k in ("step", "member", "sample") if k in turn)
        console.print(f"[bold cyan]{turn['role']}[/]" + (f" [dim]({escape(where)})[/]"
                                                         if where else ""), markup=True)
        # Soft wrap: the text is printed as it was sent, never broken into new lines.
        console.print(escape(str(turn["content"])), highlight=False, markup=True, soft_wrap=True)
        console.print()


@app.command("show", cls=Command)
@user_errors
def show(
    run_dir: Annotated[Path, typer.Argument(
        metavar="RUN", help="A folder written by `kgcheck run`.")],
    fact_id: Annotated[str, typer.Argument(metavar="FACT_ID", help="The fact's id.")],
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the verdict record as JSON.")] = False,
) -> None:
    """Show one verdict: label, confidence, reason, citations, correction and conversation."""
    from kgcheck import api

    record = api.explain(run_dir, fact_id)
    if as_json:
        typer.echo(json.dumps(record, indent=1, ensure_ascii=False))
        return
    _print_verdict(record)
