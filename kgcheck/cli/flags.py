"""The one translation of the API's argument names into the command line's flags.

The API's errors and notes name Python arguments (``resume=True``, ``only=['F', 'NA']``,
``sources='wikipedia'`` for a strategy's setting); the command line shows them as the flags
a user types (``--resume``, ``--only F,NA``, ``--set sources=wikipedia``).
"""

from __future__ import annotations

import shlex
from typing import Any

__all__ = ["FLAGS", "flag_of", "spell", "spelled"]

# Python argument -> flag, where the flag is not the argument's name with dashes.
FLAGS = {
    "settings": "--set",
    # Arguments the command line has no flag for: left out of its messages.
    "facts": "",
    "show_progress": "--progress",
    "engine_options": "--ray-address/--ray-workers",
    "run": "--run",
    "file": "FILE",
    "run_dir": "RUN_DIR",
    # Settings that have a flag of their own besides --set.
    "set:replay_latency": "--replay-latency",
    "set:base_url": "--base-url",
    "set:prompt": "--prompt",
}


def flag_of(name: str) -> str:
    """Return the flag of a Python argument (``as_dataset`` -> ``--as-dataset``)."""
    return FLAGS.get(name, "--" + name.replace("_", "-"))


# Characters a shell would split or expand: a value holding one is quoted, so that advice
# such as "continue with --resume --out DIR" can be pasted as printed.
_SHELL_SPECIAL = frozenset(" \t\n'\"`$;&|<>()*?[]#~\\")


def _value(value: Any) -> str:
    if isinstance(value, list | tuple):
        text = ",".join(str(v) for v in value)
    else:
        text = str(value)
    return shlex.quote(text) if _SHELL_SPECIAL & set(text) else text


def spell(name: str, value: Any) -> str:
    """Spell one argument as the command line takes it."""
    from kgcheck.arguments import NAME_ONLY

    if name.startswith("set:") and name not in FLAGS:
        key = name.removeprefix("set:")
        return f"--set {key}=..." if value is NAME_ONLY else f"--set {key}={_value(value)}"
    flag = flag_of(name)
    if not flag:
        return ""
    if name == "settings" and value is not NAME_ONLY:
        return " ".join(f"--set {v}" for v in value)
    if value is NAME_ONLY or value is True:
        return flag
    if value is False:
        return "--no-" + flag.removeprefix("--")
    return f"{flag} {_value(value)}"


def spelled(message: Any) -> str:
    """Return an error's or note's text with its arguments spelled as flags."""
    from kgcheck.arguments import ArgumentMessage, ArgumentNote

    if isinstance(message, ArgumentMessage | ArgumentNote):
        return message.spelled(spell, join=" ")
    return str(message)
