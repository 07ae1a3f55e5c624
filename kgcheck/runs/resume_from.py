"""Continue a run from its folder alone: ``kgcheck run --resume --out DIR``.

(And start it over the same way: ``kgcheck run --fresh --out DIR``.)

``run.json`` keeps the arguments the run was planned with (``RunInfo.arguments``). A resume
given no input takes every argument it is not given from there: the input, the strategy,
the models, the selection of facts, the settings. An argument given takes the stored one's
place and is held to the run as any resume is (``kgcheck.runs.runner.resume_conflicts``):
the strategy, models and settings by value (where a server is and how long to wait for it
excepted), the facts by content. A difference is refused in one line. A resume given the
input is planned from what it is given alone, as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kgcheck.arguments import NAME_ONLY, Arg, literal
from kgcheck.data.runfolder import RUN_INFO, read_run_info
from kgcheck.runs.runner import RunError

__all__ = ["fresh_arguments", "json_argument", "resume_arguments",
           "stored_arguments"]

# Where the facts come from: one of them is needed to plan a run.
INPUT_ARGUMENTS = ("dataset", "triples", "sparql")
# Local files, kept as absolute paths: a resume may start from another folder.
PATH_ARGUMENTS = frozenset({"triples", "labels", "data", "pricing"})


def json_argument(name: str, value: Any) -> Any:
    """Return an argument as run.json keeps it (paths absolute, sequences as lists)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if name in PATH_ARGUMENTS and isinstance(value, str | os.PathLike):
        text = os.fspath(value)
        return text if "://" in text else os.path.abspath(os.path.expanduser(text))
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {str(k): json_argument("", v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_argument("", v) for v in value]
    return value


def stored_arguments(out_dir: str | Path) -> dict[str, Any] | None:
    """Return the arguments ``out_dir``'s run was planned with (None: none are recorded)."""
    folder = Path(out_dir)
    if not (folder / RUN_INFO).is_file():
        return None
    stored = read_run_info(folder, RunError).get("arguments")
    return dict(stored) if isinstance(stored, dict) and stored else None


def _has_input(given: Mapping[str, Any]) -> bool:
    return any(given.get(name) is not None for name in (*INPUT_ARGUMENTS, "facts"))


def _input_mention() -> Arg:
    return Arg("dataset", NAME_ONLY, triples=NAME_ONLY, sparql=NAME_ONLY, join=", ")


def _merged(stored: Mapping[str, Any], given: Mapping[str, Any],
            explicit: Iterable[str]) -> dict[str, Any]:
    """Return the stored arguments with the ones given in their place (settings key by key)."""
    merged = {**given, **stored}
    for name in set(explicit) - {"settings"}:
        merged[name] = given[name]
    merged["settings"] = {**(stored.get("settings") or {}), **(given.get("settings") or {})}
    return merged


def fresh_arguments(out_dir: str | Path, given: Mapping[str, Any],
                    explicit: Iterable[str]) -> dict[str, Any]:
    """Return the arguments of a fresh start in ``out_dir``: its run's, with ``given``'s.

    Given an input, the run is a new one and nothing is taken from the folder; without
    one, the folder's run starts over, with the arguments given in place of its own.
    """
    stored = stored_arguments(out_dir)
    if stored is None or _has_input(given):
        return dict(given)
    return _merged(stored, given, explicit)


def resume_arguments(out_dir: str | Path, given: Mapping[str, Any],
                     explicit: Iterable[str]) -> dict[str, Any]:
    """Return the arguments of a resume into ``out_dir``: the stored ones, with ``given``'s.

    What is given is checked against the run as any resume is (``resume_conflicts``): the
    facts by content, the strategy, models and settings by value; a difference is refused
    in one line.

    Args:
        out_dir: The run folder.
        given: ``plan_run``'s arguments as the caller has them (defaults included).
        explicit: The names in ``given`` the caller set; the others are taken from the
            folder. ``settings`` holds only settings the caller set.

    Returns:
        The arguments to plan the resumed run with.

    Raises:
        RunError: The folder holds no run, or records no arguments, and no input is given.

    """
    if _has_input(given):
        # The input given: the run's arguments are the ones given, as they always were.
        return dict(given)
    stored = stored_arguments(out_dir)
    if stored is not None:
        return _merged(stored, given, explicit)
    folder = literal(str(out_dir))
    if not (Path(out_dir) / RUN_INFO).is_file():
        raise RunError(f"nothing to resume in {folder}: it holds no run ({RUN_INFO}); "
                       "give the facts ({input}) to start one there", input=_input_mention())
    raise RunError(f"{folder}: its {RUN_INFO} does not record the run's arguments (an "
                   "older kgcheck wrote it, or the facts were given in memory): give "
                   "them again ({input}, and the rest as the run had them)",
                   input=_input_mention())
