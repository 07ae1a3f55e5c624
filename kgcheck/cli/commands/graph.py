"""``kgcheck graph``: list the graphs and draw them offline (PNG, SVG, Mermaid).

Graphs are the ones Studio serves: the registered strategies (``dka``, ``giv-z``,
``dka-sc``, plugins) and ``consensus``. PNG and SVG are laid out
by Graphviz through pygraphviz, whose wheels bundle Graphviz; Mermaid is plain text. Nothing
is sent over the network (LangChain's ``draw_mermaid_png`` would use a web service).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from kgcheck.cli.app import Command, app, console, user_errors

FORMATS = ("png", "svg", "mermaid")
SUFFIXES = {".png": "png", ".svg": "svg", ".mmd": "mermaid", ".mermaid": "mermaid"}
EXTENSIONS = {"png": ".png", "svg": ".svg", "mermaid": ".mmd"}

graph_app = typer.Typer(help="List the graphs and draw them (PNG, SVG, Mermaid), offline.",
                        no_args_is_help=True)
app.add_typer(graph_app, name="graph")


class GraphDrawError(ValueError):
    """A graph cannot be drawn as asked."""


def graph_sources() -> dict[str, tuple[str, Callable[[], Any]]]:
    """Every drawable graph: name -> (its description, a function compiling it)."""
    from kgcheck.api import served_graphs

    return {name: (graph.description, graph.compile)
            for name, graph in sorted(served_graphs().items())}


def graph_key(name: str) -> str:
    """Return the registered name of graph ``name``; an unknown name lists the known ones."""
    sources = graph_sources()
    key = name.strip().lower()
    if key not in sources:
        raise GraphDrawError(f"unknown graph {name!r}; known: {', '.join(sources) or 'none'}")
    return key


def compiled_graph(name: str) -> Any:
    """Compile the graph called ``name``; an unknown name lists the known ones."""
    return graph_sources()[graph_key(name)][1]()


def render(graph: Any, fmt: str, *, xray: bool = False) -> bytes:
    """Draw a compiled graph as PNG or SVG bytes, or Mermaid text (UTF-8)."""
    if fmt not in FORMATS:
        raise GraphDrawError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    drawable = graph.get_graph(xray=xray)
    if fmt == "mermaid":
        return drawable.draw_mermaid().encode("utf-8")
    return _graphviz(drawable, fmt)


def _graphviz(drawable: Any, fmt: str) -> bytes:
    """Lay the graph out with Graphviz (pygraphviz), with LangChain's drawer doing the walk."""
    try:
        import pygraphviz as pgv
    except ImportError:
        raise GraphDrawError(
            f"{fmt} needs pygraphviz>=2.0 (its wheels bundle Graphviz): "
            "pip install 'pygraphviz>=2.0'; --format mermaid works without it"
        ) from None
    from langchain_core.runnables.graph import LabelsDict
    from langchain_core.runnables.graph_png import PngDrawer

    class Drawer(PngDrawer):
        """LangChain's PNG drawer with calmer styles (Mermaid's palette)."""

        def add_node(self, viz: Any, node: str) -> None:
            ends = node.rsplit(":", 1)[-1] in ("__start__", "__end__")
            viz.add_node(node, label=self.get_node_label(node), fontname=self.fontname,
                         shape="oval" if ends else "box",
                         style="filled" if ends else "rounded,filled",
                         fillcolor="#ffffff" if ends else "#f2f0ff",
                         color="#7a6fd0", fontsize=12 if ends else 14)

        def add_edge(self, viz: Any, source: str, target: str, label: str | None = None,
                     conditional: bool = False) -> None:  # noqa: FBT001, FBT002 - as LangChain's
            super().add_edge(viz, source, target, label, conditional)
            viz.get_edge(source, target).attr.update(color="#555555", arrowsize="0.7")

        @staticmethod
        def update_styles(viz: Any, graph: Any) -> None:
            if last := graph.last_node():
                viz.get_node(last.id).attr.update(fillcolor="#bfb6fc")

    labels = LabelsDict(nodes={node.id: node.name for node in drawable.nodes.values()},
                        edges={})
    drawer = Drawer("Helvetica", labels)
    viz = pgv.AGraph(directed=True, nodesep=0.5, ranksep=0.6, fontname="Helvetica")
    try:
        drawer.add_nodes(viz, drawable)
        drawer.add_edges(viz, drawable)
        drawer.add_subgraph(viz, [node.split(":") for node in drawable.nodes])
        for cluster in viz.subgraphs():
            # Name each subgraph box after the node that holds it.
            cluster.graph_attr.update(label=cluster.name.removeprefix("cluster_"),
                                      style="rounded,dashed", color="#999999",
                                      fontname="Helvetica", fontsize="12")
        drawer.update_styles(viz, drawable)
        return viz.draw(format=fmt, prog="dot")
    finally:
        viz.close()


def format_for(out: Path | None, fmt: str | None) -> str:
    """Return the format asked for, or the one the output file's suffix names."""
    if fmt:
        fmt = fmt.lower()
        if fmt not in FORMATS:
            raise GraphDrawError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
        return fmt
    if out is not None and out.suffix.lower() in SUFFIXES:
        return SUFFIXES[out.suffix.lower()]
    raise GraphDrawError("give --format png|svg|mermaid, or an --out file ending in "
                         + ", ".join(SUFFIXES))


@graph_app.command("list")
@user_errors
def list_graphs() -> None:
    """List the graphs that can be run, served in Studio and drawn."""
    from rich.table import Table

    table = Table(title="graphs")
    for column in ("name", "description"):
        table.add_column(column)
    for name, (description, _) in graph_sources().items():
        table.add_row(name, description)
    console.print(table)


@graph_app.command("draw", cls=Command)
@user_errors
def draw(
    name: Annotated[str, typer.Argument(
        metavar="NAME", help="Graph name (see `kgcheck graph list`).")],
    fmt: Annotated[str | None, typer.Option("--format", help="png, svg or mermaid "
                                            "(default: from the --out suffix).")] = None,
    out: Annotated[Path | None, typer.Option(help="Output file; mermaid without --out "
                                             "prints the text.")] = None,
    xray: Annotated[bool, typer.Option(help="Show the nodes inside subgraphs.")] = False,
) -> None:
    """Draw a graph's nodes and edges as a picture or Mermaid text, offline."""
    graph_key(name)  # a misspelt name is the first thing to report, whatever the options
    fmt = format_for(out, fmt)
    if out is None and fmt != "mermaid":
        raise GraphDrawError(f"--format {fmt} writes a file: give --out FILE")
    data = render(compiled_graph(name), fmt, xray=xray)
    if out is None:
        typer.echo(data.decode("utf-8"), nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    from kgcheck.data.atomic import write_bytes_atomic

    write_bytes_atomic(out, data)
    console.print(f"{name}: {out} ({len(data):,} bytes)")


@graph_app.command("docs")
@user_errors
def docs(
    out_dir: Annotated[Path, typer.Option(help="Folder for the pictures.")] = Path("docs/graphs"),
    names: Annotated[list[str] | None, typer.Option(
        "--name", metavar="NAME", help="Only these graphs (repeatable); default: each "
        "distinct graph.")] = None,
) -> None:
    """Draw every graph once as PNG, SVG and Mermaid (with --xray) for the documentation."""
    from kgcheck.data.atomic import write_bytes_atomic

    chosen = [graph_key(name) for name in names] if names else list(graph_sources())
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in chosen:
        graph = compiled_graph(name)
        for fmt in FORMATS:
            path = out_dir / f"{name}{EXTENSIONS[fmt]}"
            write_bytes_atomic(path, render(graph, fmt, xray=True))
        console.print(f"{name}: {out_dir}/{name}.png .svg .mmd")
