"""The run options (``RunSpec``) and the model options (``ModelOptions``), without the API.

``kgcheck.runs.spec`` declares them; this module is their face for the command line, which
builds its options from the fields (``kgcheck.cli.options``) and imports nothing else below
the API layer. It imports no model or graph code, so that ``kgcheck run --help`` stays fast.
"""

from __future__ import annotations

from kgcheck.runs.spec import (
    GROUPS,
    ModelOptions,
    RunSpec,
    cli_fields,
    option_meta,
    python_fields,
)

__all__ = ["GROUPS", "ModelOptions", "RunSpec", "cli_fields", "option_meta", "python_fields"]
