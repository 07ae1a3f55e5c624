"""Evidence stores and indexes at paths that cannot work: one clear line, no crash."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.retrievers.index import IndexBusyError, index_lock
from tests.conftest import ROOT

runner = CliRunner()
SAMPLE = ROOT / "vendored" / "sample-corpus"


@pytest.mark.parametrize("store", ["/proc/kgcheck-test.sqlite", "FILE/x.sqlite", "DIR"])
def test_corpus_import_into_an_unwritable_store_is_one_line(tmp_path, store: str) -> None:
    (tmp_path / "FILE").write_text("not a folder")
    (tmp_path / "DIR").mkdir()
    path = store if store.startswith("/") else str(tmp_path / store)
    result = runner.invoke(app, ["corpus", "import", "--dataset", "yago", "--from", str(SAMPLE),
                                 "--store", path])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert path in text and ("cannot open the corpus store" in text or "is a folder" in text)
    assert "Traceback" not in result.output and "--store" in text


def test_a_second_index_build_into_one_chroma_folder_is_refused(tmp_path) -> None:
    chroma = tmp_path / "chroma"
    args = [sys.executable, "-m", "kgcheck.cli", "index", "--dataset", "yago", "--corpus",
            str(SAMPLE), "--chroma-path", str(chroma), "--limit", "1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with index_lock(str(chroma)):  # a build in progress
        second = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=120)
        with pytest.raises(IndexBusyError):
            with index_lock(str(chroma)):
                pass
    assert second.returncode == 2, second.stderr
    text = " ".join(second.stderr.split())
    assert f"another `kgcheck index` is building the index in {chroma}" in text
    assert "Traceback" not in second.stderr
    # Once the first build has ended, the same command builds the index.
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "indexed 1 facts" in " ".join(done.stdout.split())

