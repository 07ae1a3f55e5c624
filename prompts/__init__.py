"""Prompt templates as files: one per method and step, plus per-KG notes and examples."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

PROMPTS_DIR = Path(__file__).resolve().parent
# The line that splits a prompt file into instructions (a system message) and data.
DATA_MARKER = "[data]"


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


# Templates by the name they were asked for: read once, then served from memory.
_LOADED: dict[str, tuple[Path, str]] = {}


def is_loaded(name: str) -> bool:
    """Tell whether ``load_prompt(name, ...)`` will be served from memory (no file I/O)."""
    return name in _LOADED


def load_prompt(name: str, required: set[str]) -> str:
    """Read a template, checking it has every ``required`` placeholder."""
    if name not in _LOADED:
        path = prompt_path(name)
        _LOADED[name] = (path, path.read_text(encoding="utf-8"))
    path, template = _LOADED[name]
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


def _read_kg_notes() -> dict[str, str]:
    data = json.loads((PROMPTS_DIR / "kg_notes.json").read_text(encoding="utf-8"))
    return {k.lower(): v for k, v in data.items()}


# Read at import, so that graph nodes never touch the file system for it.
KG_NOTES = _read_kg_notes()


def kg_note(dataset: str) -> str:
    """Return the note for a KG, or nothing when it has none."""
    return KG_NOTES.get(dataset.lower(), "")
