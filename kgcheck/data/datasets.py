"""Datasets and gold labels in the upstream layout, as ``Fact`` lists."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgcheck.data.facts import Fact
from kgcheck.data.upstream import (
    DataError,
    DataSource,
    as_source,
    canonical_dataset,
    dataset_names,
    dataset_path,
    open_data,
)

# The study uses 2,800 of FactBench's 12,060 triples: every correct one and five wrong types.
FACTBENCH_WRONG_TYPES = (
    "wrong_mix_domain",
    "wrong_mix_range",
    "wrong_mix_domainrange",
    "wrong_mix_property",
    "wrong_mix_random",
)


def in_benchmark(dataset: str, fact_id: str) -> bool:
    """Apply the study's FactBench subset rule; every other dataset is used whole."""
    if dataset.lower() != "factbench":
        return True
    return "correct_" in fact_id or any(kind in fact_id for kind in FACTBENCH_WRONG_TYPES)


def _triple_of(dataset: str, fact_id: str, value: Any) -> list[Any]:
    # FactBench values are [[s, p, o], [date, date]]; the dates are not part of the triple.
    if isinstance(value, list) and value and isinstance(value[0], list):
        value = value[0]
    if not isinstance(value, list):
        raise DataError(
            f"{dataset_path(dataset, 'kg.json')}: row {fact_id!r} is not a [subject, "
            f"predicate, object] list"
        )
    return value


def _label_of(dataset: str, fact_id: str, value: Any) -> bool:
    if value in (0, 1, True, False, "0", "1"):
        return bool(int(value))
    raise DataError(
        f"{dataset_path(dataset, 'gt.json')}: label of {fact_id!r} is {value!r}, expected 1 or 0"
    )


def load_facts(
    dataset: str, data: str | Path | DataSource | None = None, *, subset: bool = True
) -> list[Fact]:
    """Load a dataset's facts with gold labels (and sentences where the layout has them)."""
    src = as_source(data)
    name = canonical_dataset(src, dataset)
    kg = src.read_json(dataset_path(name, "kg.json"))
    if not isinstance(kg, dict):
        raise DataError(f"{dataset_path(name, 'kg.json')}: expected an object of id -> triple")
    gt_path = dataset_path(name, "gt.json")
    gt = src.read_json(gt_path) if src.exists(gt_path) else {}
    sent_path = dataset_path(name, "kg_modified.json")
    sentences = src.read_json(sent_path) if src.exists(sent_path) else {}
    facts = []
    for fact_id, value in kg.items():
        if subset and not in_benchmark(name, fact_id):
            continue
        label = _label_of(name, fact_id, gt[fact_id]) if fact_id in gt else None
        facts.append(
            Fact.from_triple(
                fact_id,
                name,
                _triple_of(name, fact_id, value),
                label,
                sentence=sentences.get(fact_id),
            )
        )
    return facts


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset's size and balance, for ``kgcheck datasets``."""

    name: str
    facts: int
    labelled: int
    true_share: float | None
    defects: int


def describe_datasets(data: str | Path | None = None) -> list[DatasetInfo]:
    """Summarise every dataset present in a data folder."""
    src = open_data(data)
    infos = []
    for name in dataset_names(src):
        facts = load_facts(name, src)
        labelled = [f for f in facts if f.label is not None]
        true = sum(1 for f in labelled if f.label)
        infos.append(
            DatasetInfo(
                name=name,
                facts=len(facts),
                labelled=len(labelled),
                true_share=true / len(labelled) if labelled else None,
                defects=sum(1 for f in facts if f.defect),
            )
        )
    return infos
