"""Lay the installed ``kgcheck`` namespace out as one folder of links, for tools that read files.

The repository keeps ``graphs/``, ``evals/``, ... at its top level and maps them under
``kgcheck.`` (``[tool.setuptools.package-dir]`` in pyproject.toml). Editable installs find
them through an import hook, which mypy and import-linter do not use: they are run over this
tree, where ``kgcheck/graphs`` is a link to ``graphs/``.

    python -m tests.support.package_tree build/package-tree
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """The package -> folder mapping of pyproject.toml."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = config["tool"]["setuptools"]["package-dir"]
    return {name: root / folder for name, folder in mapping.items()}


def build_tree(target: Path, root: Path = ROOT) -> Path:
    """Make ``target/kgcheck`` with links to the real folders; return ``target``."""
    if target.exists():
        shutil.rmtree(target)
    top = target / "kgcheck"
    top.mkdir(parents=True)
    dirs = package_dirs(root)
    for child in dirs["kgcheck"].iterdir():
        if child.name != "__pycache__":
            (top / child.name).symlink_to(child)
    for name, folder in dirs.items():
        if name != "kgcheck":
            (target / name.replace(".", "/")).symlink_to(folder, target_is_directory=True)
    return target


def commit_tree(commit: str, into: Path, root: Path = ROOT) -> Path:
    """Extract ``commit`` of the repository at ``root`` into ``into``; return its namespace tree.

    Benchmarks run the code of an earlier commit this way, beside this tree's, in one run.
    """
    source = into / "source"
    source.mkdir()
    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", commit],
                             capture_output=True, check=True).stdout
    archive_path = into / "source.tar"
    archive_path.write_bytes(archive)
    with tarfile.open(archive_path) as tar:
        tar.extractall(source, filter="data")
    return build_tree(into / "tree", root=source)


if __name__ == "__main__":
    print(build_tree(Path(sys.argv[1]).resolve()))
