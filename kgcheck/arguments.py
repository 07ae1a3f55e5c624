"""Errors that name the caller's arguments, spelled the caller's way.

An error raised to a Python caller says ``resume=True`` or ``only=['F', 'NA']``; the command
line shows the same error with its flags (``--resume``, ``--only F,NA``). A message is a
template whose fields are ``Arg`` mentions; ``str(error)`` is the Python spelling and
``error.spelled(spell)`` any other (the CLI's translation table is ``kgcheck.cli.flags``).

```python
raise ArgumentError("{resume} and {fresh} contradict each other; pick one",
                    resume=Arg("resume", True), fresh=Arg("fresh", True))
```
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["NAME_ONLY", "Arg", "ArgumentError", "ArgumentMessage", "ArgumentNote",
           "Placeholder", "Spell", "literal", "python_spelling", "truthy"]


class _NameOnly:
    def __repr__(self) -> str:
        return "NAME_ONLY"


# A mention of the argument itself, without a value ("out", "--out").
NAME_ONLY: Any = _NameOnly()


class Placeholder(str):
    """A value that stands for one the caller chooses (``N``, ``PATH``), shown without quotes."""

    def __repr__(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Arg:
    """One or more arguments as a message mentions them: names with values (or ``NAME_ONLY``)."""

    pairs: tuple[tuple[str, Any], ...]
    # How the pairs are joined, whatever the spelling (", " for alternatives); None: its own.
    join: str | None = None

    def __init__(self, name: str, value: Any = NAME_ONLY, *, join: str | None = None,
                 **more: Any) -> None:
        object.__setattr__(self, "pairs", ((name, value), *more.items()))
        object.__setattr__(self, "join", join)


# How a front end spells an argument: (Python name, value or NAME_ONLY) -> text.
Spell = Callable[[str, Any], str]


# The words that say "yes" in a setting, a flag's value or an environment variable.
TRUE_WORDS = ("1", "true", "yes", "on")


def truthy(text: str | None) -> bool:
    """Read a yes/no word (``true``, ``on``, ``1``, ...; case and spaces ignored)."""
    return (text or "").strip().lower() in TRUE_WORDS


def literal(text: str) -> str:
    """Escape text for a message template that has mentions (its braces stay braces)."""
    return text.replace("{", "{{").replace("}", "}}")


def python_spelling(name: str, value: Any) -> str:
    """Spell an argument as a Python caller writes it: ``resume=True``, ``out``."""
    # A strategy's setting ("set:max_attempts") is a keyword argument of its own.
    name = name.removeprefix("set:")
    return name if value is NAME_ONLY else f"{name}={value!r}"


class ArgumentMessage(Exception):
    """Mix-in of errors whose message mentions arguments (``Arg`` fields of a template).

    Without mentions the message is used as it is (braces included).
    """

    def __init__(self, message: str, **mentions: Arg) -> None:
        self.template = message
        self.mentions: Mapping[str, Arg] = mentions
        super().__init__(self.spelled(python_spelling))

    def spelled(self, spell: Spell, join: str = ", ") -> str:
        """Return the message with every mention spelled by ``spell`` (pairs joined by ``join``)."""
        return _spell(self.template, self.mentions, spell, join)

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable (Ray sends errors between processes) with its mentions.
        return (_rebuild, (type(self), self.template, dict(self.mentions)))


def _rebuild(cls: type[ArgumentMessage], template: str,
             mentions: dict[str, Arg]) -> ArgumentMessage:
    return cls(template, **mentions)


def _spell(template: str, mentions: Mapping[str, Arg], spell: Spell, join: str) -> str:
    if not mentions:
        return template
    # A spelling may have no word for an argument (""): it is left out.
    return template.format(**{
        key: (arg.join or join).join(
            text for text in (spell(name, value) for name, value in arg.pairs) if text)
        for key, arg in mentions.items()})


class ArgumentNote(str):
    """A warning text that mentions arguments: a ``str`` in the Python spelling.

    ``note.spelled(spell)`` gives the same note in another spelling (the CLI's flags).
    """

    template: str
    mentions: Mapping[str, Arg]

    def __new__(cls, message: str, **mentions: Arg) -> ArgumentNote:  # noqa: D102
        note = super().__new__(cls, _spell(message, mentions, python_spelling, ", "))
        note.template, note.mentions = message, mentions
        return note

    def spelled(self, spell: Spell, join: str = ", ") -> str:
        """Return the note with every mention spelled by ``spell``."""
        return _spell(self.template, self.mentions, spell, join)


class ArgumentError(ArgumentMessage, ValueError):
    """An argument, or a combination of them, that cannot work."""
