"""The ``kgcheck`` Typer application; command modules in ``kgcheck/cli/commands`` attach to it.

The commands are registered by name (``COMMANDS``) without importing them: a command's module
is imported when that command runs or its help is shown, and imports what it needs from
``kgcheck.api`` inside the command's body. ``kgcheck --version`` and ``kgcheck --help``
import no command at all.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

if TYPE_CHECKING:
    from rich.console import Console

# Besides: ``console`` and ``err_console``, made on first use (module ``__getattr__``).
__all__ = ["COMMANDS", "Command", "LazyGroup", "Listed", "app", "every_command",
           "kgcheck_version", "load_env_file", "say_error", "say_warning", "user_errors"]


@dataclass(frozen=True)
class Listed:
    """A command as the top-level help lists it: the module that defines it, its summary."""

    module: str
    summary: str


# Every command, in the order of the help; each summary is its docstring's first line
# (a test holds them equal).
COMMANDS = {
    "run": Listed("run", "Check facts with a strategy; verdicts go to OUT/verdicts.jsonl, "
                  "scores to summary.json."),
    "datasets": Listed("datasets", "List the datasets with their fact counts and true share."),
    "settings": Listed("settings", "List the settings `kgcheck run --strategy STRATEGY --set "
                       "KEY=VALUE` accepts."),
    "review": Listed("review", "Serve a review page for a run; decisions go to "
                     "RUN/labels.csv as they are made."),
    "sample": Listed("sample", "Draw facts to label (seeded), with each fact's design weight."),
    "estimate": Listed("estimate", "Estimate the KG's accuracy three ways; write "
                       "RUN/estimate.json."),
    "export": Listed("export", "Export verdicts with their triples, reasons, times and review "
                     "labels."),
    "show": Listed("show", "Show one verdict: label, confidence, reason, citations, correction "
                   "and conversation."),
    "import": Listed("importing", "Import verdicts into a run folder and score them like a "
                     "run."),
    "report": Listed("report", "Build tables 5 to 8 (and the figures) from run folders."),
    "reproduce": Listed("reproduce", "Recompute the study's tables and figures from its "
                        "recorded answers."),
    "view": Listed("view", "Serve a local explorer of runs; its address (with its token) is "
                   "the first line printed."),
    "errors": Listed("errors", "Explain each wrong verdict with a model, cluster the "
                     "explanations, write the tables."),
    "compare": Listed("compare", "Compare two runs: McNemar's exact test and paired bootstrap "
                      "intervals of A - B."),
    "agreement": Listed("agreement", "Report Cohen's or Fleiss' kappa, Krippendorff's alpha "
                        "and the model's agreement."),
    "sweep": Listed("sweep", "Run every cell of a sweep as a resumable run folder, then write "
                    "the leaderboard."),
    "corpus": Listed("corpus", "Evidence corpora for RAG: import and list."),
    "index": Listed("index", "Embed the chunks that RAG runs will need into a Chroma "
                    "collection per dataset."),
    "search-api": Listed("search_api", "Serve stored search results over HTTP, with the "
                         "hosted FactCheck API's paths."),
    "graph": Listed("graph", "List the graphs and draw them (PNG, SVG, Mermaid), offline."),
    "studio": Listed("studio", "Serve every registered graph (and consensus) with `langgraph "
                     "dev`."),
}
COMMANDS_PACKAGE = "kgcheck.cli.commands"


class LazyGroup(TyperGroup):
    """The top-level group: a command's module is imported when the command is looked up.

    The top-level help lists ``COMMANDS`` by their summaries, importing nothing.
    """

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:  # noqa: D102
        self._load_unlisted()
        return [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:  # noqa: D102
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            if self._listing:
                summary = COMMANDS[cmd_name].summary
                return TyperCommand(cmd_name, short_help=summary, help=summary)
            self._load(COMMANDS[cmd_name].module)
        elif cmd_name not in self.commands:
            self._load_unlisted()
        return self.commands.get(cmd_name)

    def _load_unlisted(self) -> None:
        """Import the command modules ``COMMANDS`` does not name (they work, but not lazily)."""
        import pkgutil

        package = importlib.import_module(COMMANDS_PACKAGE)
        listed = {c.module for c in COMMANDS.values()}
        for found in pkgutil.iter_modules(package.__path__):
            if found.name not in listed:
                self._load(found.name)

    def format_help(self, ctx: Any, formatter: Any) -> None:  # noqa: D102
        self._listing = True
        try:
            self._load_unlisted()
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Resolve as Typer does; suggest a close name among every command, loaded or not."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            import difflib

            close = difflib.get_close_matches(name, [*COMMANDS, *self.commands])
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def _load(self, module: str) -> None:
        """Import a command module; add the commands it registered on ``app``."""
        importlib.import_module(f"{COMMANDS_PACKAGE}.{module}")
        for info in app.registered_commands:
            name = info.name or (info.callback.__name__ if info.callback else "")
            if name not in self.commands:
                self.add_command(typer.main.get_command_from_info(
                    info, pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode))
        for group in app.registered_groups:
            if group.name and group.name not in self.commands:
                self.add_command(typer.main.get_group_from_info(
                    group, pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode,
                    suggest_commands=app.suggest_commands))

    def load_all(self) -> None:
        """Import every command (for a reference of every command and option)."""
        for listed in COMMANDS.values():
            self._load(listed.module)


def every_command() -> LazyGroup:
    """Return the ``kgcheck`` group with every command loaded (references, completion, tests)."""
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    group.load_all()
    return group


app = typer.Typer(
    cls=LazyGroup,
    name="kgcheck",
    help="Check the facts of a knowledge graph with LLMs (FactCheck strategies on LangGraph). "
    "Reads ./.env (API keys, OLLAMA_HOST, OTEL_EXPORTER_OTLP_ENDPOINT) without overriding "
    "variables already set.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
_consoles: dict[str, Console] = {}


def __getattr__(name: str) -> Any:
    # ``console`` and ``err_console`` are made when first used: rich loads only then.
    if name in ("console", "err_console"):
        if name not in _consoles:
            from rich.console import Console

            _consoles[name] = (Console() if name == "console"
                               else Console(stderr=True, soft_wrap=True))
        return _consoles[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


F = TypeVar("F", bound=Callable[..., Any])
DOTENV = ".env"


def kgcheck_version() -> str:
    """Return kgcheck's version (the package's, which the distribution's equals)."""
    import kgcheck

    return kgcheck.__version__


def load_env_file(path: Path | None = None) -> bool:
    """Read ``./.env`` as Studio does; variables already set in the environment win."""
    target = path or Path.cwd() / DOTENV
    if not target.is_file():
        return False
    from dotenv import load_dotenv

    return load_dotenv(target, override=False)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"kgcheck {kgcheck_version()}")
        raise typer.Exit()


@app.callback()
def main(
    _version: Annotated[bool, typer.Option(
        "--version", help="Print the version and exit.", callback=_show_version,
        is_eager=True)] = False,
) -> None:
    """Check the facts of a knowledge graph with LLMs (FactCheck strategies on LangGraph)."""
    load_env_file()
    show_own_warnings()


def show_own_warnings() -> None:
    """Print kgcheck's own warnings (the answer cache's, a run folder's) as one plain line.

    Python's format (file, line and source of the ``warnings.warn`` call) is for
    developers; others' warnings keep it.
    """
    import warnings

    shown = warnings.showwarning
    if getattr(shown, "kgcheck", False):
        return

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if getattr(category, "__module__", "").startswith("kgcheck."):
            say_warning(message)
        else:
            shown(message, category, filename, lineno, file, line)

    show.kgcheck = True  # type: ignore[attr-defined]
    warnings.showwarning = show


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
        # TriplesError; an ArgumentMessage (RunError) a run that cannot start or go on.
        from kgcheck.arguments import ArgumentMessage
        from kgcheck.cli.flags import spelled

        try:
            return func(*args, **kwargs)
        except (ValueError, ArgumentMessage, FileNotFoundError) as exc:
            say_error(spelled(exc))
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _redacted(text: str) -> str:
    # A message may quote a URL or setting with its credential; never print it.
    from kgcheck.api import redact_text

    return redact_text(text)


def say_error(message: object) -> None:
    """Print an error line: arguments spelled as flags, credentials masked, no markup."""
    from rich.markup import escape

    from kgcheck.cli.flags import spelled

    _err().print(f"[bold red]error:[/] {escape(_redacted(spelled(message)))}",
                 highlight=False)


def say_warning(message: object) -> None:
    """Print a warning line: arguments spelled as flags, credentials masked, no markup."""
    from rich.markup import escape

    from kgcheck.cli.flags import spelled

    _err().print(f"[bold yellow]warning:[/] {escape(_redacted(spelled(message)))}",
                 highlight=False)


def _err() -> Console:
    console: Console = __getattr__("err_console")
    return console
