"""Installed from a wheel, kgcheck is one namespace: only ``kgcheck`` in site-packages.

The wheel is built from a copy of the tracked files (what a clean clone holds), installed
into a folder of its own and imported from there, with the repository out of reach. Building
it, and installing the copy editable as `make install` does, prints no setuptools banner.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.package_tree import ROOT, package_dirs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    return source


@pytest.fixture(scope="module")
def built(source: Path, tmp_path_factory) -> tuple[Path, str]:
    """The wheel and everything its build printed."""
    out = tmp_path_factory.mktemp("wheel")
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    (found,) = out.glob("kgcheck-*.whl")
    return found, run.stdout + run.stderr


@pytest.fixture(scope="module")
def wheel(built: tuple[Path, str]) -> Path:
    return built[0]


def test_building_the_wheel_prints_no_setuptools_banner(built: tuple[Path, str]) -> None:
    printed = built[1]
    assert "BuildBackendWarning" not in printed, printed[:3000]
    assert "absent from the `packages` configuration" not in printed, printed[:3000]


def test_the_editable_install_of_make_install_is_quiet(source: Path, tmp_path: Path) -> None:
    # The environment the Makefile gives its editable install. Into a folder of its own
    # (--target): with --prefix pip would uninstall the kgcheck of the running environment.
    quiet = re.search(r'^EDITABLE_QUIET := PYTHONWARNINGS="([^"]*)"$',
                      (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)
    assert quiet, "the Makefile's EDITABLE_QUIET is gone"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(tmp_path / "site"), "-e", str(source)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONWARNINGS": quiet.group(1)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout + run.stderr == "", (run.stdout + run.stderr)[:3000]


def test_the_wheel_holds_only_the_kgcheck_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"kgcheck", f"{wheel.name.split('-py3')[0]}.dist-info"}, tops


def test_every_module_and_data_file_is_in_the_wheel(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for package, folder in package_dirs().items():
        prefix = package.replace(".", "/")
        for module in folder.rglob("*.py"):
            rel = module.relative_to(folder)
            if "__pycache__" in rel.parts or (package == "kgcheck" and rel.parts[0] in {
                    p.split(".")[1] for p in package_dirs() if p != "kgcheck"}):
                continue
            assert f"{prefix}/{rel.as_posix()}" in names, rel
    for data in ("kgcheck/vendored/factcheck/YAGO.json.gz",
                 "kgcheck/vendored/factcheck/manifest.json",
                 "kgcheck/vendored/models/all-minilm-l6-v2/tokenizer.json.gz",
                 "kgcheck/vendored/sample-corpus/rag_dataset/yago/10143/2.txt",
                 "kgcheck/prompts/dka.txt", "kgcheck/prompts/examples/yago.json",
                 "kgcheck/prompts/kg_notes.json", "kgcheck/providers/pricing.json",
                 "kgcheck/review/static/review.html", "kgcheck/review/static/review.js",
                 "kgcheck/review/static/review.css", "kgcheck/review/static/favicon.svg",
                 "kgcheck/view/static/view.html", "kgcheck/view/static/view.js",
                 "kgcheck/view/static/view.css", "kgcheck/prompts/errors_taxonomy.txt"):
        assert data in names, data


def test_the_installed_wheel_runs_on_its_own(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
         str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert sorted(p.name for p in target.iterdir() if p.name != "bin") == [
        "kgcheck", f"{wheel.name.split('-py3')[0]}.dist-info"]
    # No site: neither the repository nor its editable install is on the path, only the
    # wheel's folder and the third-party packages.
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(target)!r}, {sysconfig.get_paths()["purelib"]!r}]
        import kgcheck
        assert kgcheck.__file__.startswith({str(target)!r}), kgcheck.__file__
        facts = kgcheck.load_dataset("yago")[:3]
        verdicts = kgcheck.check(facts, strategy="giv-f")
        print(sorted(kgcheck.strategies()), [v.label for v in verdicts], verdicts[0].method)
    """)
    ran = subprocess.run([sys.executable, "-S", "-c", script], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip() == (
        "['dka', 'dka-sc', 'giv-f', 'giv-z', 'rag', 'schema'] ['T', 'T', 'F'] GIV-F")
