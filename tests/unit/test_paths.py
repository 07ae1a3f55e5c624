"""The ``.kgcheck`` home: one derivation, used by the corpus store and the vector index."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgcheck.data.paths import HOME_ENV, kgcheck_home
from kgcheck.retrievers.index import default_chroma_path
from kgcheck.retrievers.store import default_store_path


def test_home_is_the_setting_else_dot_kgcheck_here(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(HOME_ENV, raising=False)
    assert kgcheck_home() == tmp_path / ".kgcheck"
    assert default_store_path() == tmp_path / ".kgcheck" / "corpus.sqlite"
    assert default_chroma_path() == tmp_path / ".kgcheck" / "chroma"
    monkeypatch.setenv(HOME_ENV, "~/kg-work")
    assert kgcheck_home() == Path.home() / "kg-work"
    assert default_chroma_path().parent == default_store_path().parent == kgcheck_home()
