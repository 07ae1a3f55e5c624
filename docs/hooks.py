"""MkDocs hooks: the generated reference pages and the guides' place in the navigation.

Two pages are written from the code while the site builds, so they cannot drift from it:

- ``<!-- generate: cli -->`` becomes the reference of every ``kgcheck`` command and option,
  walked from the click command tree of the Typer app (``typer.main.get_command``);
- ``<!-- generate: settings -->`` becomes every setting of every registered graph, read
  from the Context dataclasses (``kgcheck.settings`` for strategies).

- ``<!-- generate: label_columns -->`` becomes ``labels.csv``'s header;
- ``<!-- generate: api -->`` becomes a mkdocstrings ``:::`` entry for every name of
  ``kgcheck.__all__``, at the module that defines it.

mkdocstrings reads the code from a tree that lays the repository out as the installed
``kgcheck`` namespace (``graphs/`` as ``kgcheck/graphs``: tests/support/package_tree.py), built
into ``build/docs-tree`` when the site builds.

Every page in ``docs/guides/`` that the nav does not list is added to the Guides section
(titled by its first heading), so a new guide needs no edit of ``mkdocs.yml``.
"""

from __future__ import annotations

import dataclasses
import html
import inspect
import re
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# mkdocs.yml's mkdocstrings ``paths``: the repository as the installed namespace.
TREE = ROOT / "build" / "docs-tree"

GUIDES = "guides"
MARKER = re.compile(r"<!--\s*generate:\s*(\w+)\s*-->")


# --- navigation -------------------------------------------------------------------------

def _listed(nav: Any) -> set[str]:
    """Return every page path a nav (or a part of it) names."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_listed(item) for item in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(_listed(value) for value in nav.values()))
    return set()


def _title(page: Path) -> str:
    """Return a page's first heading, else its file name as words."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].replace("`", "").strip()
    return page.stem.replace("-", " ").capitalize()


def _package_tree(target: Path) -> None:
    """Lay the repository out as the installed namespace, as tests/support/package_tree.py does.

    The top-level files of ``kgcheck/`` are copied rather than linked: griffe resolves a
    linked ``__init__.py`` to the real folder, where ``graphs/``, ``evals/``, ... are not.
    """
    sys.path.insert(0, str(ROOT))
    from tests.support.package_tree import build_tree

    build_tree(target, ROOT)
    top = target / "kgcheck"
    for link in top.iterdir():
        if link.is_symlink() and link.is_file():
            real = link.resolve()
            link.unlink()
            shutil.copyfile(real, link)


def on_config(config: Any) -> Any:
    """Lay out the package tree for mkdocstrings; add unlisted guides to the nav."""
    _package_tree(TREE)
    nav = config.get("nav")
    docs = Path(config["docs_dir"])
    if not nav:
        return config
    section = next((item for item in nav if isinstance(item, dict) and "Guides" in item), None)
    if section is None:
        return config
    listed = _listed(nav)
    for page in sorted((docs / GUIDES).glob("*.md")):
        path = f"{GUIDES}/{page.name}"
        if path not in listed:
            section["Guides"].append({_title(page): path})
    return config


# --- generated markdown -----------------------------------------------------------------

def _cell(text: Any) -> str:
    """Render text for a markdown table cell (no pipes, no line breaks, no raw HTML)."""
    value = " ".join(str(text).split())
    return html.escape(value, quote=False).replace("|", "\\|")


def _code(text: Any) -> str:
    """Render a literal as inline code inside a table cell."""
    value = str(text).replace("|", "\\|").replace("`", "'")
    return f"`{value}`" if value else ""


DEFAULT = re.compile(r"\s*\[(default: [^\]]*|required)\]\s*$")


def _param_row(param: Any, ctx: Any) -> str:
    """Render one argument or option as the help shows it: names, meaning, default."""
    names, help_text = param.get_help_record(ctx) or (param.human_readable_name, "")
    if param.param_type_name == "argument":
        names = param.metavar or param.human_readable_name
        help_text = getattr(param, "help", None) or ""
    default = ""
    while found := DEFAULT.search(help_text):
        default = ("required" if found.group(1) == "required"
                   else _code(found.group(1).removeprefix("default: ")))
        help_text = help_text[:found.start()]
    if param.required:
        default = "required"
    return f"| {_code(names)} | {default} | {_cell(help_text)} |"


def _subcommands(command: Any, ctx: Any) -> list[tuple[str, Any]]:
    """Return a group's visible commands by name (none for a plain command)."""
    if not hasattr(command, "list_commands"):
        return []
    found = [(name, command.get_command(ctx, name)) for name in command.list_commands(ctx)]
    return [(name, sub) for name, sub in found if sub is not None and not sub.hidden]


def _commands(group: Any, ctx: Any) -> list[tuple[Any, Any]]:
    """Walk a group's commands depth first: (context, command) pairs, groups included."""
    found = []
    for name, command in _subcommands(group, ctx):
        sub = command.context_class(command, info_name=name, parent=ctx)
        found.append((sub, command))
        found.extend(_commands(command, sub))
    return found


def _command_section(ctx: Any, command: Any) -> str:
    path = ctx.command_path
    depth = path.count(" ")
    lines = [f"{'#' * (2 if depth <= 1 else 3)} `{path}`", ""]
    text = (command.help or command.short_help or "").strip()
    if text:
        lines += [html.escape(text.replace("\b\n", ""), quote=False), ""]
    pieces = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```text", f"{path} {pieces}".rstrip(), "```", ""]
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    if params:
        lines += ["| argument or option | default | meaning |", "| --- | --- | --- |"]
        lines += [_param_row(p, ctx) for p in params]
        lines.append("")
    children = _subcommands(command, ctx)
    if children:
        lines += ["Commands: " + ", ".join(f"`{path} {n}`" for n, _ in children) + ".", ""]
    return "\n".join(lines)


def cli_reference() -> str:
    """Return the markdown reference of every ``kgcheck`` command, from the Typer app."""
    import typer.main

    from kgcheck.cli import app

    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="kgcheck")
    sections = [_command_section(ctx, root)]
    sections += [_command_section(sub, command) for sub, command in _commands(root, ctx)]
    return "\n".join(sections)


def _settings_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| setting | type | default | meaning |", "| --- | --- | --- | --- |"]
    for row in rows:
        default = row["default"]
        if isinstance(default, list | tuple):
            default = ",".join(map(str, default))
        elif isinstance(default, dict):
            default = ", ".join(f"{k}={v}" for k, v in default.items())
        shown = '`""`' if default == "" else _code(default)
        lines.append(f"| `{row['name']}` | {_cell(row['type'])} | {shown} | "
                     f"{_cell(row['description'])} |")
    return "\n".join(lines)


def _context_rows(context: type) -> list[dict[str, Any]]:
    """Describe a Context dataclass's fields as ``kgcheck.settings`` does."""
    rows = []
    for item in dataclasses.fields(context):
        if item.default is not dataclasses.MISSING:
            default = item.default
        elif item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        else:
            default = None
        kind = re.sub(r"Annotated\[([^,\]]+),.*\]", r"\1", str(item.type))
        rows.append({"name": item.name, "type": re.sub(r"typing\.|<class '|'>", "", kind),
                     "default": default, "description": item.metadata.get("description", "")})
    return rows


def settings_reference() -> str:
    """Return every setting: the shared model settings, then each graph's own."""
    import kgcheck
    from kgcheck.graphs.registry import graphs
    from kgcheck.providers.settings import ModelSettings

    shared = set(ModelSettings.names())
    model_rows = _context_rows(ModelSettings)
    out = ["## Model settings (every strategy)", "",
           "Declared once in `kgcheck/providers/settings.py` and shared by every strategy: "
           "`--set KEY=VALUE` on the command line, keyword arguments in Python, the "
           "assistant's settings in Studio.", "", _settings_table(model_rows), ""]
    for name, entry in sorted(graphs().items()):
        if entry.kind == "strategy":
            rows = kgcheck.settings(name)
        else:
            rows = _context_rows(entry.context)
        own = [row for row in rows if row["name"] not in shared]
        method = getattr(entry.context, "METHOD", "")
        out += [f"## `{name}`", "",
                f"{_cell(entry.description)} Kind: `{entry.kind}`"
                + (f"; verdicts are labelled `{method}`." if method else "."), "",
                "Its own settings (besides the model settings above):" if any(
                    row["name"] in shared for row in rows) else "Its settings:", "",
                _settings_table(own), ""]
    return "\n".join(out)


def api_reference() -> str:
    """Return a ``:::`` entry for every public name, grouped: functions, models, errors."""
    import kgcheck

    groups: dict[str, list[str]] = {"Functions": [], "Run options": [],
                                    "Facts and verdicts": [], "Errors and warnings": []}
    for name in kgcheck.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(kgcheck, name)
        where = f"{obj.__module__}.{obj.__qualname__}"
        if name in kgcheck.OPTIONS:
            groups["Run options"].append(where)
        elif inspect.isclass(obj) and issubclass(obj, BaseException):
            groups["Errors and warnings"].append(where)
        elif inspect.isclass(obj):
            groups["Facts and verdicts"].append(where)
        else:
            groups["Functions"].append(where)
    out = []
    for title, entries in groups.items():
        out += [f"## {title}", ""]
        out += [line for entry in entries for line in (f"::: {entry}", "")]
    return "\n".join(out)


def label_columns() -> str:
    """Return ``labels.csv``'s header, as the run folder module declares it."""
    from kgcheck.data.runfolder import LABEL_COLUMNS

    return f"`{','.join(LABEL_COLUMNS)}`"


GENERATORS = {"cli": cli_reference, "settings": settings_reference, "api": api_reference,
              "label_columns": label_columns}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each ``<!-- generate: NAME -->`` marker with the generated text."""
    return MARKER.sub(lambda match: GENERATORS[match.group(1)](), markdown)
