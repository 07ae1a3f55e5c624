"""The one error type of the statistics: inputs that cannot be compared or scored."""

from __future__ import annotations


class StatsInputError(ValueError):
    """Runs or label files that do not fit together; the message names them and why."""


def missing_extra(package: str) -> StatsInputError:
    """Say which optional extra provides ``package``."""
    return StatsInputError(f"these statistics need {package}: pip install 'kgcheck[stats]'")
