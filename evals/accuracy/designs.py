"""Sampling designs for a human audit: which facts a person should label, with what weight.

Three designs, as in the KG-accuracy literature (Gao et al., PVLDB 2019):

- ``srs``: simple random sampling without replacement; every fact weighs ``N / n``.
- ``stratified``: strata by a key (the predicate, the model's verdict, ...), a simple random
  sample in each, allocated in proportion to the strata's sizes; a fact weighs
  ``N_h / n_h``. Strata too small to receive two labels are pooled into ``(other)``, so
  that every stratum's variance can be estimated.
- ``twcs``: two-stage weighted cluster sampling by subject: clusters (a subject's facts) are
  drawn with probability proportional to their size, with replacement, then up to ``m``
  facts of each drawn cluster by simple random sampling. Labelling several facts of one
  entity is cheaper than labelling facts of as many entities.

Every draw is seeded (``numpy.random.default_rng(seed)``): the same facts and seed give the
same sample.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kgcheck.data.sampling import largest_remainder

DESIGNS = ("srs", "stratified", "twcs")
OTHER = "(other)"
# A stratum needs two labels for its variance; smaller ones are pooled.
MIN_PER_STRATUM = 2
DEFAULT_CLUSTER_SIZE = 3


class DesignError(ValueError):
    """A sampling design that cannot be drawn (too few facts, an unknown design)."""


@dataclass(frozen=True)
class Unit:
    """What a design needs to know about one fact: its id, stratum and cluster."""

    fact_id: str
    stratum: str = ""
    cluster: str = ""


@dataclass(frozen=True)
class Draw:
    """One sampled fact: its design weight (facts it stands for), stratum and cluster draw."""

    fact_id: str
    weight: float
    stratum: str = ""
    cluster: str = ""


def design_label(design: str, key: str | None) -> str:
    """Name a design with its key, as written into the sample file (``stratified:predicate``)."""
    return f"{design}:{key}" if key and design != "srs" else design


def parse_design_label(text: str) -> tuple[str, str | None]:
    """Split ``stratified:predicate`` into the design and its key."""
    design, _, key = text.strip().partition(":")
    if design not in DESIGNS:
        raise DesignError(f"unknown design {text!r}; known: {', '.join(DESIGNS)}")
    return design, key or None


def pooled_strata(sizes: Mapping[str, int], n: int) -> dict[str, str]:
    """Map each stratum to itself, or to ``(other)`` when it would get fewer than 2 labels."""
    total = sum(sizes.values())
    small = {h for h, size in sizes.items() if n * size / total < MIN_PER_STRATUM}
    if len(small) == 1 and len(sizes) > 1:
        # One small stratum alone would stay small: pool it with the next smallest.
        rest = sorted((h for h in sizes if h not in small), key=lambda h: sizes[h])
        small.add(rest[0])
    return {h: (OTHER if h in small else h) for h in sizes}


def draw_srs(units: Sequence[Unit], n: int, rng: np.random.Generator) -> list[Draw]:
    """Draw ``n`` facts by simple random sampling without replacement."""
    _check_size(units, n)
    picked = rng.choice(len(units), size=n, replace=False)
    weight = len(units) / n
    return [Draw(units[i].fact_id, weight, units[i].stratum) for i in picked]


def pool_units(units: Sequence[Unit], n: int) -> list[Unit]:
    """Pool the strata too small for two of ``n`` labels into ``(other)``."""
    sizes: dict[str, int] = defaultdict(int)
    for unit in units:
        sizes[unit.stratum] += 1
    pool = pooled_strata(sizes, n)
    return [Unit(u.fact_id, pool[u.stratum], u.cluster) for u in units]


def draw_stratified(units: Sequence[Unit], n: int, rng: np.random.Generator) -> list[Draw]:
    """Draw ``n`` facts stratified by ``Unit.stratum`` (pooled first), allocated proportionally."""
    _check_size(units, n)
    by_stratum: dict[str, list[Unit]] = defaultdict(list)
    for unit in units:
        by_stratum[unit.stratum].append(unit)
    counts = largest_remainder({h: len(members) for h, members in by_stratum.items()}, n,
                               minimum=MIN_PER_STRATUM)
    out = []
    for h in sorted(by_stratum):
        members, k = by_stratum[h], counts[h]
        picked = rng.choice(len(members), size=k, replace=False)
        out += [Draw(members[i].fact_id, len(members) / k, h) for i in picked]
    return out


def draw_twcs(units: Sequence[Unit], n: int, rng: np.random.Generator,
              cluster_size: int = DEFAULT_CLUSTER_SIZE) -> list[Draw]:
    """Draw about ``n`` facts by TWCS: PPS clusters with replacement, then SRS in each.

    ``cluster`` of a draw is ``<draw number>|<cluster key>``: a cluster drawn twice is two
    draws, as the estimator needs.
    """
    _check_size(units, n)
    if cluster_size < 1:
        raise DesignError(f"cluster size must be at least 1, got {cluster_size}")
    clusters: dict[str, list[Unit]] = defaultdict(list)
    for unit in units:
        clusters[unit.cluster].append(unit)
    keys = sorted(clusters)
    sizes = np.array([len(clusters[k]) for k in keys], dtype=float)
    total = len(units)
    out: list[Draw] = []
    draw = 0
    while len(out) < n:
        draws = max(1, math.ceil((n - len(out)) / cluster_size))
        for index in rng.choice(len(keys), size=draws, replace=True, p=sizes / sizes.sum()):
            members = clusters[keys[index]]
            m = min(cluster_size, len(members), n - len(out))
            if m <= 0:
                break
            draw += 1
            for i in rng.choice(len(members), size=m, replace=False):
                out.append(Draw(members[i].fact_id, total / (draws * m),
                                members[i].stratum, f"{draw}|{keys[index]}"))
    return out


def draw(units: Iterable[Unit], n: int, design: str = "srs", seed: int = 0,
         cluster_size: int = DEFAULT_CLUSTER_SIZE) -> list[Draw]:
    """Draw a sample of ``n`` facts by a design; the same units and seed give the same draw."""
    items = list(units)
    rng = np.random.default_rng(seed)
    if design == "srs":
        return draw_srs(items, n, rng)
    if design == "stratified":
        return draw_stratified(pool_units(items, n), n, rng)
    if design == "twcs":
        return draw_twcs(items, n, rng, cluster_size)
    raise DesignError(f"unknown design {design!r}; known: {', '.join(DESIGNS)}")


def _check_size(units: Sequence[Unit], n: int) -> None:
    if n < 1:
        raise DesignError(f"sample size must be at least 1, got {n}")
    if n > len(units):
        raise DesignError(f"cannot draw {n} facts from {len(units)}")
