"""Statistics over run folders: paired comparisons, bootstrap intervals, significance groups.

Every figure comes from the library made for it (scipy, statsmodels) or from resampling
plain counts with numpy; tests check each against scikit-learn, scipy and statsmodels.
"""

from kgcheck.evals.stats.errors import StatsInputError

__all__ = ["StatsInputError"]
