"""kgcheck: check the facts of a knowledge graph with LLMs, as LangGraph state machines.

The Python API (``kgcheck.api``) is available from the package itself::

    import kgcheck
    verdicts = kgcheck.check(kgcheck.load_dataset("yago")[:10], strategy="dka")

Names are imported on first use, so that ``import kgcheck.graphs...`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

API = (
    "acheck", "arun", "check", "datasets", "dry_run", "adry_run", "evidence_sources", "export",
    "fetched_evidence", "iter_triples", "load_dataset", "open_review", "read_sparql",
    "read_triples", "report", "reproduce", "run", "select_facts", "settings", "strategies",
    "strategy", "KgcheckWarning", "SettingsError", "ArgumentError", "RunError", "sample",
    "import_verdicts", "aimport_verdicts", "estimate", "analyse_errors", "open_explorer",
    "compare", "agreement", "explain",
)
MODELS = ("Fact", "Verdict")
SWEEPS = ("sweep", "asweep", "leaderboard")
OPTIONS = ("RunSpec", "ModelOptions")

__all__ = [*API, *MODELS, *SWEEPS, *OPTIONS, "__version__"]

# kgcheck's warnings read as one line (``kgcheck: warning: ...``), not as Python's
# file:line report of the frame that issued them (see kgcheck.warning_lines).
importlib.import_module("kgcheck.warning_lines").show_own_warnings_as_lines()


def __getattr__(name: str) -> Any:
    if name in API:
        return getattr(importlib.import_module("kgcheck.api"), name)
    if name in SWEEPS:
        return getattr(importlib.import_module("kgcheck.runs.sweeps"), name)
    if name in OPTIONS:
        return getattr(importlib.import_module("kgcheck.options"), name)
    if name in MODELS:
        return getattr(importlib.import_module("kgcheck.data.facts"), name)
    raise AttributeError(f"module 'kgcheck' has no attribute {name!r}")
