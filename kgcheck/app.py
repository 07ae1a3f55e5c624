"""The ``kgcheck`` Typer application; command modules in ``kgcheck/commands`` attach to it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

app = typer.Typer(
    name="kgcheck",
    help="Check the facts of a knowledge graph with LLMs (FactCheck strategies on LangGraph).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(func: F) -> F:
    """Turn the project's input errors into one clear line and exit code 2, not a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # ValueError covers DataError, UnknownModelError, UnknownStrategyError, PromptError,
        # TriplesError; RunError covers a run that cannot start or go on.
        from kgcheck.evals.runner import RunError
        from kgcheck.providers.secrets import redact_text

        try:
            return func(*args, **kwargs)
        except (ValueError, RunError, FileNotFoundError) as exc:
            # A message may quote a URL or setting with its credential; never print it.
            err_console.print(f"[bold red]error:[/] {redact_text(str(exc))}", highlight=False,
                              markup=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]
