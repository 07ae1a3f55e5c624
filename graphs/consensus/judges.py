"""Who breaks a consensus tie: a model, nobody, or the larger sibling of a member.

``cons-up`` / ``cons-down`` pick the member that agrees most / least with the majority
(its consensus alignment CA_M) and ask that member's larger sibling (gemma2:9b ->
gemma2:27b, as in the study).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kgcheck.arguments import ArgumentError
from kgcheck.data import safe_json
from kgcheck.providers import PROVIDERS, split_spec

JUDGE_NONE = "none"
CONS_UP = "cons-up"
CONS_DOWN = "cons-down"
CONS_JUDGES = (CONS_UP, CONS_DOWN)
# The study's judges: each member model's larger sibling (REFERENCE.md section 2).
DEFAULT_SIBLINGS = {
    "gemma2:9b": "gemma2:27b",
    "qwen2.5:7b": "qwen2.5:14b",
    "llama3.1:8b": "llama3.1:70b",
    "mistral:7b": "mistral-nemo:12b",
}


class ConsensusError(ArgumentError):
    """A consensus setting is missing or malformed; the message names it."""


def _pairs(value: Mapping[str, Any] | str | None, what: str, *,
           last_equals: bool = False) -> dict[str, str]:
    """Read ``key=value,key=value`` (or a mapping) into a dict of strings."""
    if not value:
        return {}
    if isinstance(value, Mapping):
        return {str(k).strip(): str(v).strip() for k, v in value.items()}
    out = {}
    for item in str(value).split(","):
        if not item.strip():
            continue
        key, sep, val = item.rpartition("=") if last_equals else item.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise ConsensusError(f"{what}: {item.strip()!r} is not of the form key=value")
        out[key.strip()] = val.strip()
    return out


def parse_alignment(value: Mapping[str, Any] | str | None) -> dict[str, float]:
    """Read CA_M per member: a mapping, ``spec=0.9,...``, or a JSON file (a run summary).

    Reads a file when ``value`` names one: call it off the event loop.
    """
    if isinstance(value, str) and value.strip().endswith(".json"):
        path = Path(value.strip()).expanduser()
        if not path.is_file():
            raise ConsensusError(f"alignment: file {str(path)!r} does not exist")
        try:
            data = safe_json.parse(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConsensusError(f"alignment: {path} is not valid JSON ({exc.msg})") from None
        value = data.get("alignment", data) if isinstance(data, dict) else None
        if not isinstance(value, Mapping) or not value:
            raise ConsensusError(
                f"alignment: {path} holds no alignment mapping (a consensus summary.json has "
                "one under 'alignment')"
            )
    raw = _pairs(value, "alignment", last_equals=True)
    out = {}
    for key, text in raw.items():
        try:
            out[key] = float(text)
        except ValueError:
            raise ConsensusError(f"alignment of {key!r}: {text!r} is not a number") from None
    return out


def _lookup(table: Mapping[str, Any], spec: str) -> Any:
    """Find a member in a table keyed by its spec or by its model name."""
    if spec in table:
        return table[spec]
    name = split_spec(spec)[1]
    return table.get(name)


def pick_member(judge: str, members: Sequence[str], alignment: Mapping[str, float]) -> str:
    """Pick the most (``cons-up``) or least (``cons-down``) aligned member; first on ties."""
    if judge not in CONS_JUDGES:
        raise ConsensusError(f"judge {judge!r}: expected one of {', '.join(CONS_JUDGES)}")
    scores = {m: _lookup(alignment, m) for m in members}
    missing = [m for m, s in scores.items() if s is None]
    if missing:
        raise ConsensusError(
            f"judge {judge}: alignment lacks member(s) {', '.join(missing)}; "
            f"given: {', '.join(alignment) or 'nothing'}"
        )
    ranked = sorted(members, key=lambda m: -scores[m] if judge == CONS_UP else scores[m])
    return ranked[0]


def larger_sibling(spec: str, siblings: Mapping[str, str] | str) -> str:
    """Name a member's judge: its larger sibling, with the member's provider."""
    table = _pairs(siblings, "siblings") if isinstance(siblings, str) else dict(siblings)
    sibling = _lookup(table, spec)
    if not sibling:
        raise ConsensusError(
            f"siblings: no larger sibling known for {spec}; known: "
            + ", ".join(f"{k}->{v}" for k, v in table.items())
        )
    head = sibling.partition(":")[0]
    if head in PROVIDERS:
        return sibling
    return f"{split_spec(spec)[0]}:{sibling}"


def resolve_judge(judge: str, members: Sequence[str], *,
                  alignment: Mapping[str, float] | None = None,
                  siblings: Mapping[str, str] | str | None = None) -> str | None:
    """Turn a judge setting into a model spec, or None for ``none``."""
    setting = (judge or JUDGE_NONE).strip()
    if setting.lower() == JUDGE_NONE:
        return None
    if setting.lower() in CONS_JUDGES:
        if not alignment:
            raise ConsensusError(
                f"judge {setting.lower()} needs each member's alignment (CA_M): set alignment, "
                "e.g. to a previous consensus run's summary.json, or run `kgcheck run "
                "--consensus ... --judge " + setting.lower() + "`, which measures it"
            )
        member = pick_member(setting.lower(), members, alignment)
        return larger_sibling(member, DEFAULT_SIBLINGS if siblings is None else siblings)
    split_spec(setting)
    return setting


