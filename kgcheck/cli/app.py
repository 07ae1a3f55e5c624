"""The ``kgcheck`` Typer application; command modules in ``kgcheck/cli/commands`` attach to it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from dotenv import load_dotenv
from rich.console import Console
from typer.core import TyperArgument, TyperCommand

app = typer.Typer(
    name="kgcheck",
    help="Check the facts of a knowledge graph with LLMs (FactCheck strategies on LangGraph). "
    "Reads ./.env (API keys, OLLAMA_HOST, OTEL_EXPORTER_OTLP_ENDPOINT) without overriding "
    "variables already set.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])
DOTENV = ".env"


def kgcheck_version() -> str:
    """Return the installed distribution's version."""
    try:
        return version("kgcheck")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def load_env_file(path: Path | None = None) -> bool:
    """Read ``./.env`` as Studio does; variables already set in the environment win."""
    target = path or Path.cwd() / DOTENV
    return target.is_file() and load_dotenv(target, override=False)


def _show_version(value: bool) -> None:
    if value:
        console.print(f"kgcheck {kgcheck_version()}", highlight=False)
        raise typer.Exit()


@app.callback()
def main(
    _version: Annotated[bool, typer.Option(
        "--version", help="Print the version and exit.", callback=_show_version,
        is_eager=True)] = False,
) -> None:
    """Check the facts of a knowledge graph with LLMs (FactCheck strategies on LangGraph)."""
    load_env_file()


class _NamedArgument(TyperArgument):
    """An argument shown by its metavar alone (``RUN_DIR...``), as click shows it."""

    def display_type_rich(self, ctx: Any) -> str | None:  # noqa: D102
        return None

    def _usage_display_name(self) -> str:
        return self.metavar or super()._usage_display_name()


class Command(TyperCommand):
    """A command whose positional arguments read ``NAME`` in help, not ``{name} <str>``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: D107
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument) and param.metavar:
                # Typer builds the parameters itself; only their presentation changes here.
                param.__class__ = _NamedArgument


def user_errors(func: F) -> F:
    """Turn the project's input errors into one clear line and exit code 2, not a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # ValueError covers DataError, UnknownModelError, UnknownStrategyError, PromptError,
        # TriplesError; RunError covers a run that cannot start or go on.
        from kgcheck.data.runfolder import RunError
        from kgcheck.providers.secrets import redact_text

        try:
            return func(*args, **kwargs)
        except (ValueError, RunError, FileNotFoundError) as exc:
            # A message may quote a URL or setting with its credential; never print it.
            err_console.print(f"[bold red]error:[/] {redact_text(str(exc))}", highlight=False,
                              markup=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]
