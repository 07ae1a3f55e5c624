"""No import cycle anywhere in the ``kgcheck`` namespace, imports inside functions included.

import-linter's layer contract keeps the layers one-way, but two modules of one layer could
still import each other, one of them inside a function to get past the import-time error.
Such a pair is one module in two files: neither can be read, tested or moved alone. This
test builds the import graph of every module the installed namespace holds (the repository's
``graphs/``, ``evals/``, ... mapped under ``kgcheck.`` as pyproject's ``package-dir`` says,
laid out by ``tests.support.package_tree``) with grimp, import-linter's engine, which reads each
module's source and records every ``import`` and ``from ... import`` in it: at the top, inside
functions and methods, and under ``if TYPE_CHECKING:``. Imports for type checking are kept
on purpose: mypy follows them, and a cycle of types is a cycle of design all the same.

A cycle is a strongly connected component of more than one module; each is listed with the
imports (file line) that close it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx

from tests.support.package_tree import build_tree, package_dirs

# Run in the package tree, so that ``kgcheck`` is found there with every mapped folder in it
# (the editable install's import hook, which grimp does not use, is not asked).
_GRAPH_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path

    import grimp
    import kgcheck

    graph = grimp.build_graph("kgcheck", cache_dir=None, exclude_type_checking_imports=False)
    imports = [
        {"importer": importer, "imported": imported,
         "lines": sorted({d["line_number"] for d in graph.get_import_details(
             importer=importer, imported=imported)})}
        for importer in sorted(graph.modules)
        for imported in sorted(graph.find_modules_directly_imported_by(importer))
    ]
    json.dump({"package": str(Path(kgcheck.__file__).parent), "modules": sorted(graph.modules),
               "imports": imports}, sys.stdout)
""")


def import_graph(tree: Path) -> tuple[nx.DiGraph, dict[str, object]]:
    """Build the import graph of the ``kgcheck`` namespace laid out in ``tree``."""
    result = subprocess.run([sys.executable, "-c", _GRAPH_SCRIPT], cwd=tree, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    graph = nx.DiGraph()
    graph.add_nodes_from(found["modules"])
    for edge in found["imports"]:
        if edge["importer"] != edge["imported"]:  # a module naming itself is no cycle
            graph.add_edge(edge["importer"], edge["imported"], lines=edge["lines"])
    return graph, found


def import_cycles(graph: nx.DiGraph) -> list[list[str]]:
    """Return each cycle: the modules of a strongly connected component of two or more."""
    return sorted(sorted(component) for component in nx.strongly_connected_components(graph)
                  if len(component) > 1)


def describe(graph: nx.DiGraph, cycle: list[str]) -> str:
    """Say which modules import each other and by which imports (importer's lines)."""
    inside = graph.subgraph(cycle)
    imports = "\n".join(f"    {a} -> {b} (line {', '.join(map(str, inside.edges[a, b]['lines']))})"
                        for a, b in sorted(inside.edges))
    return f"  {', '.join(cycle)}:\n{imports}"


def _cycles_report(graph: nx.DiGraph) -> str:
    cycles = import_cycles(graph)
    return f"{len(cycles)} import cycle(s):\n" + "\n".join(describe(graph, c) for c in cycles)


def test_the_kgcheck_namespace_has_no_import_cycle(tmp_path: Path) -> None:
    tree = build_tree(tmp_path / "tree")
    graph, found = import_graph(tree)
    # The graph is the whole namespace: the tree's kgcheck, every mapped folder in it.
    assert Path(str(found["package"])) == tree / "kgcheck"
    assert set(package_dirs()) <= set(graph.nodes)
    assert {"kgcheck.graphs.state", "kgcheck.evals.export", "kgcheck.retrievers.store",
            "kgcheck.data.runfolder"} <= set(graph.nodes)
    assert import_cycles(graph) == [], _cycles_report(graph)


def _with_modules(tree: Path, package: str, modules: dict[str, str]) -> None:
    """Replace a linked package folder of ``tree`` by a copy holding extra modules."""
    folder = tree / package.replace(".", "/")
    real = folder.resolve()
    folder.unlink()
    shutil.copytree(real, folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")


def test_a_cycle_closed_inside_a_function_or_for_type_checking_is_found(tmp_path: Path) -> None:
    tree = build_tree(tmp_path / "tree")
    _with_modules(tree, "kgcheck.evals", {
        # Closed by an import inside a function, the usual way around the import-time error.
        "lower": "from kgcheck.evals.upper import ranked\n\nRANKS = 3\n",
        "upper": """
            def ranked() -> int:
                from kgcheck.evals.lower import RANKS

                return RANKS
        """,
        # Closed under TYPE_CHECKING, across two of the namespace's folders.
        "typed": """
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from kgcheck.graphs.typed_back import Back
        """,
    })
    _with_modules(tree, "kgcheck.graphs", {"typed_back": "import kgcheck.evals.typed\n"})

    graph, _ = import_graph(tree)
    cycles = import_cycles(graph)
    assert ["kgcheck.evals.lower", "kgcheck.evals.upper"] in cycles
    assert ["kgcheck.evals.typed", "kgcheck.graphs.typed_back"] in cycles
    report = _cycles_report(graph)
    assert "kgcheck.evals.upper -> kgcheck.evals.lower (line 3)" in report
    assert "kgcheck.evals.typed -> kgcheck.graphs.typed_back (line 5)" in report

