"""Fill prompt files with a fact: the one helper every node that writes a prompt uses."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from kgcheck.data.facts import Fact
from kgcheck.prompts import is_loaded, kg_note, load_prompt, render


def prompt_values(fact: Fact) -> dict[str, Any]:
    """Values a prompt template may use: raw and readable terms, the KG's note."""
    subject, predicate, obj = fact.readable_terms()
    return {
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "fact": f"{subject} {predicate} {obj}",
        "raw_subject": fact.subject,
        "raw_predicate": fact.predicate,
        "raw_object": fact.object,
        "dataset": fact.dataset,
        "sentence": fact.sentence or "",
        "kg_note": kg_note(fact.dataset),
    }


def _tidy(text: str) -> str:
    # An empty optional placeholder ({kg_note} outside DBpedia) would leave a gap of blank lines.
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def fill_prompt(name: str, required: set[str], fact: Fact, **extra: Any) -> str:
    """Fill the prompt file ``name`` with a fact's values and ``extra`` (may read the file)."""
    template = load_prompt(name, required)
    return _tidy(render(template, **{**prompt_values(fact), **extra}))


async def render_prompt(name: str, required: set[str], fact: Fact, **extra: Any) -> str:
    """Fill the prompt file ``name`` with a fact's values and ``extra``, from a graph node.

    The first use of a file reads it in a worker thread (the dev server forbids blocking
    I/O on the event loop); later uses are served from memory without a thread hop.
    """
    if is_loaded(name):
        return fill_prompt(name, required, fact, **extra)
    return await asyncio.to_thread(fill_prompt, name, required, fact, **extra)
