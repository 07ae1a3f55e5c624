"""Prompt templates as files: one per method and step, plus per-KG notes and examples."""

from __future__ import annotations

import json
import string
from functools import cache
from pathlib import Path
from typing import Any

PROMPTS_DIR = Path(__file__).resolve().parent


class PromptError(ValueError):
    """A prompt file is missing, unreadable, or lacks a placeholder its step needs."""


def prompt_path(name: str) -> Path:
    """Resolve a prompt name: a path as given, else a file in ``prompts/``."""
    candidate = Path(name).expanduser()
    if candidate.is_file():
        return candidate.resolve()
    bundled = PROMPTS_DIR / name
    if bundled.is_file():
        return bundled
    known = ", ".join(sorted(p.name for p in PROMPTS_DIR.glob("*.txt")))
    raise PromptError(f"prompt file {name!r} not found (not a path, not in prompts/: {known})")


def placeholders(template: str) -> set[str]:
    """List the ``{names}`` a template uses."""
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


@cache
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def load_prompt(name: str, required: set[str]) -> str:
    """Read a template, checking it has every ``required`` placeholder."""
    path = prompt_path(name)
    template = _read(path)
    try:
        found = placeholders(template)
    except ValueError as exc:
        raise PromptError(
            f"{path}: not a valid template ({exc}); write literal braces as {{{{ }}}}"
        ) from None
    missing = required - found
    if missing:
        raise PromptError(
            f"{path}: missing placeholder(s) {', '.join('{' + m + '}' for m in sorted(missing))}"
        )
    return template


def render(template: str, **values: Any) -> str:
    """Fill a template; placeholders it does not use are ignored."""
    return template.format_map({k: values.get(k, "") for k in placeholders(template)})


@cache
def kg_notes() -> dict[str, str]:
    """Per-KG notes added to prompts (e.g. DBpedia's knowledge cut-off), by lower-case name."""
    data = json.loads((PROMPTS_DIR / "kg_notes.json").read_text(encoding="utf-8"))
    return {k.lower(): v for k, v in data.items()}


def kg_note(dataset: str) -> str:
    """Return the note for a KG, or nothing when it has none."""
    return kg_notes().get(dataset.lower(), "")
