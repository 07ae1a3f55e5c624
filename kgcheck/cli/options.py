"""Command-line options made from a spec's fields: one loop, the fields' help and groups.

``kgcheck run`` takes every ``RunSpec`` field the command line is offered (``cli_fields``)
as an option of the same name (or the field's ``flags``), with its description as help and
its group as the help's panel; ``kgcheck errors`` takes the ``ModelOptions`` it lacks the same
way. A command made here is a function whose signature is built (``__signature__``), which
Typer reads as it reads a written one.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from kgcheck.options import GROUPS, cli_fields, option_meta

__all__ = ["command_of", "option_parameters"]

# The flag's type when a field declares one (``cli_type``).
CLI_TYPES: dict[str, Any] = {"text": str, "path": Path, "int": int, "float": float,
                             "bool": bool, "list": list[str]}


def _flag_type(annotation: Any) -> Any:
    """Return the flag's type of a field's annotation: its one type besides None."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kinds) == 1:
            return kinds[0]
        raise TypeError(f"{annotation}: a field of several types declares its cli_type")
    return annotation


def option_parameters(model: type[Any], names: Sequence[str] | None = None
                      ) -> list[inspect.Parameter]:
    """Return the command-line options of a spec's fields, as a function's parameters.

    Args:
        model: The spec (``RunSpec``, ``ModelOptions``).
        names: The fields (default: every field the command line is offered).

    Returns:
        Keyword-only parameters annotated with their ``typer.Option``.

    """
    parameters = []
    chosen = list(names if names is not None else cli_fields(model))
    # Grouped as the help shows them (a panel per group, in GROUPS' order).
    order = list(GROUPS)
    chosen.sort(key=lambda n: order.index(option_meta(n, model)["group"]))
    for name in chosen:
        field = model.model_fields[name]
        meta = option_meta(name, model)
        kind = CLI_TYPES[meta["cli_type"]] if "cli_type" in meta else _flag_type(field.annotation)
        default = meta.get("cli_default", field.default)
        extra: dict[str, Any] = {"metavar": meta["metavar"]} if "metavar" in meta else {}
        flag = typer.Option(*meta.get("flags", ()), help=field.description,
                            rich_help_panel=GROUPS[meta["group"]] + " options", **extra)
        annotation = Annotated[kind if default is not None else kind | None, flag]  # type: ignore[valid-type]
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                            annotation=annotation, default=default))
    return parameters


def command_of(body: Callable[..., None], parameters: Sequence[inspect.Parameter],
               doc: str) -> Callable[..., None]:
    """Make a command: ``body(**options)`` under a signature of ``parameters``.

    Args:
        body: What the command does with its options, all given as keywords.
        parameters: The options (``option_parameters`` and the command's own).
        doc: The command's help.

    Returns:
        The function to register with ``app.command``.

    """
    def command(**options: Any) -> None:
        body(**options)

    command.__signature__ = inspect.Signature(list(parameters))  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    command.__doc__ = doc
    command.__name__ = body.__name__
    command.__qualname__ = body.__qualname__
    return command
