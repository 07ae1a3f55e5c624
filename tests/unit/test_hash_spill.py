"""The id hashes' bounded-memory set: the repeats an in-memory sort finds, spilled or not."""

from __future__ import annotations

import tempfile
from array import array
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import kgcheck.data.hash_spill as hash_spill
from kgcheck.data.hash_spill import HashSpill, repeated_hashes

LOWEST, HIGHEST = -(1 << 63), (1 << 63) - 1


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder the spills go to (empty again once each set is done)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _counted(values: np.ndarray) -> frozenset[int]:
    return frozenset(h for h, n in Counter(values.tolist()).items() if n > 1)


def _hashes(rng: np.random.Generator, n: int, repeats: int) -> np.ndarray:
    values = rng.integers(LOWEST, HIGHEST, n, dtype=np.int64, endpoint=True)
    if n:  # some hashes again, far apart and close by
        values[rng.integers(0, n, repeats)] = values[rng.integers(0, n, repeats)]
    return values


def _spilled(values: np.ndarray, cap: int, pieces: int = 5) -> HashSpill:
    spill = HashSpill(cap)
    for piece in np.array_split(values, pieces):
        spill.add(piece)
    return spill


# (A tiny cap spills often, and a repeated hash is split down to its last bits: small files.)
@pytest.mark.parametrize("cap, n, repeats", [
    (cap, n, repeats) for cap in (1, 3, 64, 1000, None)
    for n, repeats in [(0, 0), (1, 0), (2, 1), (500, 0), (500, 3), (500, 200), (5000, 40),
                       (5000, 2000)]
    if n <= 500 or cap is None or cap >= 64])
def test_the_repeats_are_the_in_memory_sorts(temp: Path, cap: int | None, n: int,
                                             repeats: int) -> None:
    values = _hashes(np.random.default_rng(n + repeats), n, repeats)
    expected = repeated_hashes(values)
    assert expected == _counted(values)
    assert bool(expected) or repeats < 10, "the forced repeats are there"
    spill = _spilled(values, cap or hash_spill.MEMORY_HASHES)
    assert len(spill) == n
    assert (spill.spilled > 0) == (cap is not None and n > cap)
    assert spill.repeated() == expected
    assert _spilled(values, cap or hash_spill.MEMORY_HASHES).any_repeated() == bool(expected)
    assert not list(temp.iterdir())


def test_an_array_of_hashes_is_taken_as_is(temp: Path) -> None:
    spill = HashSpill(2)
    spill.add(array("q", [5, LOWEST, HIGHEST, 5]))
    spill.add(array("q"))
    assert spill.repeated() == repeated_hashes(array("q", [5, LOWEST, HIGHEST, 5])) == {5}
    assert HashSpill().repeated() == frozenset()


@pytest.mark.parametrize("values", [
    # All in one top-level partition: it is split again by its next bits.
    np.arange(3000, dtype=np.int64) % 1999,
    np.arange(-3000, 0, dtype=np.int64) % 1001 - 1002,
    # One hash many times (in no partition at any level within the cap), with the extremes.
    np.array([7] * 300 + [LOWEST, HIGHEST] * 2 + [LOWEST + 1], dtype=np.int64),
    np.array([HIGHEST] * 50 + [HIGHEST - 1], dtype=np.int64),
])
def test_a_partition_over_the_cap_is_split_again(temp: Path, values: np.ndarray) -> None:
    assert _spilled(values, 16).repeated() == _counted(values)
    assert not list(temp.iterdir())


def test_the_folder_goes_whatever_ends_the_set(temp: Path) -> None:
    values = np.arange(100, dtype=np.int64)
    with pytest.raises(KeyboardInterrupt), HashSpill(10) as spill:
        spill.add(values)
        assert len(list(temp.iterdir())) == 1, "spilled"
        raise KeyboardInterrupt
    assert not list(temp.iterdir())
    dropped = _spilled(values, 10)
    assert list(temp.iterdir())
    del dropped  # never closed: removed once garbage
    assert not list(temp.iterdir())
    early = _spilled(np.concatenate([values, values]), 10)
    assert early.any_repeated(), "stops at the first partition with a repeat"
    assert not list(temp.iterdir())


def test_spills_are_runs_in_one_file(temp: Path) -> None:
    # Ten spills: one write each to one file, not a file per partition per spill.
    values = np.arange(-500, 500, dtype=np.int64) * (1 << 53)
    spill = _spilled(np.concatenate([values, values[:1]]), 100, pieces=11)
    (folder,) = temp.iterdir()
    (runs,) = folder.iterdir()
    assert runs.name == "runs" and spill.spilled == 1000
    assert spill.repeated() == {int(values[0])}
    assert not list(temp.iterdir())
