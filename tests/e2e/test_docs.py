"""The documentation site builds strictly, its references are whole, and its examples run.

A fenced block in ``docs/`` preceded by ``<!-- run -->`` is executed: ``python`` blocks as
a script, ``bash`` blocks of ``kgcheck`` commands through the CLI app; ``<!-- file: NAME
-->`` writes the block to NAME first. The blocks of one page run in order, in one
temporary folder and one process forked for the page (tests/support/docs_blocks.py), so a page's
walkthrough is run as a reader would run it. Live Ollama models are
served by the stub Ollama server (tests/support/stubs, the real wire protocol on 127.0.0.1):
``OLLAMA_HOST`` points there, as a reader's points at ``ollama serve``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stubs import Behaviour, OllamaStub

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MARKER = re.compile(r"^<!--\s*(run|file:\s*(?P<name>[\w.\-/]+))\s*-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+)\s*(?P<lang>[\w+-]*)")
PAGE_TIMEOUT = 300
# Pages run side by side: much of a page's time is waiting on model round trips and disks.
PARALLEL = max(2, min(4, os.cpu_count() or 2))


@dataclasses.dataclass
class Block:
    """One marked code block of a page."""

    page: str
    line: int
    lang: str
    code: str
    file: str | None  # write the block to this file instead of running it


def marked_blocks(path: Path) -> list[Block]:
    """Return the marked blocks of a markdown page, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    marker: re.Match[str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            end = next(j for j in range(i + 1, len(lines))
                       if lines[j].startswith(fence.group("fence")))
            if marker:
                blocks.append(Block(str(path.relative_to(DOCS)), i + 1, fence.group("lang"),
                                    "\n".join(lines[i + 1:end]) + "\n", marker.group("name")))
            marker = None
            i = end + 1
            continue
        found = MARKER.match(line.strip())
        if found:
            marker = found
        elif line.strip():
            marker = None
        i += 1
    return blocks


PAGES = sorted(p for p in DOCS.rglob("*.md") if marked_blocks(p))


def test_the_pages_mark_blocks_to_run() -> None:
    runnable = [b for p in PAGES for b in marked_blocks(p) if b.file is None]
    assert len(runnable) >= 20, "the guides' offline examples are marked to run"
    assert {b.lang for b in runnable} <= {"bash", "python"}, "only bash and python blocks run"
    assert "walkthrough.md" in {p.name for p in PAGES}


@pytest.fixture(scope="module")
def ollama() -> Iterator[OllamaStub]:
    with OllamaStub(Behaviour(answer="T")) as stub:
        yield stub


@pytest.fixture(scope="module")
def page_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
              ollama: OllamaStub) -> dict[Path, tuple[int, str]]:
    """Run the selected pages' blocks, PARALLEL pages at a time: exit status and errors."""
    root = tmp_path_factory.mktemp("pages")
    selected = [page for page in PAGES if any(
        getattr(item, "callspec", None) and item.callspec.params.get("page") == page
        for item in request.session.items)]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_",
                                                                       "AZURE_", "KGCHECK_"))}
    base.update(OLLAMA_HOST=ollama.url, NO_COLOR="1", COLUMNS="100", PYTHONPATH=str(ROOT))
    plan = []
    for index, page in enumerate(selected):
        folder = root / str(index)
        (folder / "work").mkdir(parents=True)
        plan.append({"blocks": [dataclasses.asdict(b) for b in marked_blocks(page)],
                     "cwd": str(folder / "work"), "errors": str(folder / "errors.txt"),
                     "env": {**base, "KGCHECK_HOME": str(folder / ".kgcheck"),
                             "KGCHECK_CACHE_DIR": str(folder / ".cache")}})
    (root / "plan.json").write_text(json.dumps(plan))
    done = subprocess.run([sys.executable, "-m", "tests.support.docs_blocks", str(root / "plan.json"),
                           str(PARALLEL)], cwd=root, env=base, capture_output=True, text=True,
                          timeout=PAGE_TIMEOUT * max(1, len(plan)), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-6000:]
    statuses = json.loads(done.stdout.strip().splitlines()[-1])
    results = {}
    for index, page in enumerate(selected):
        errors = Path(plan[index]["errors"])
        results[page] = (statuses[str(index)],
                         errors.read_text(encoding="utf-8") if errors.exists() else "")
    return results


# The first page's test sets up page_runs, which runs every selected page: a loaded machine
# may need more than the suite's 300 s for all of them.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_marked_blocks_run(page: Path, page_runs: dict[Path, tuple[int, str]]) -> None:
    status, errors = page_runs[page]
    assert status == 0, errors[-6000:]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the site strictly (a broken link, anchor or reference fails) into a temp dir."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out


def html(site: Path, page: str) -> str:
    return (site / page / "index.html").read_text(encoding="utf-8")


def test_api_reference_documents_every_public_name(site: Path) -> None:
    import kgcheck

    text = html(site, "reference/api")
    ids = set(re.findall(r'id="(kgcheck\.[\w.]+)"', text))
    missing = [name for name in kgcheck.__all__ if name != "__version__"
               and not any(i.endswith(f".{name}") for i in ids)]
    assert not missing, f"reference/api.md lacks {missing}"


def test_cli_reference_lists_every_command_and_option(site: Path) -> None:
    import typer.main

    from kgcheck.cli import app

    text = html(site, "reference/cli")
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="kgcheck")
    names = root.list_commands(ctx)
    assert {"run", "review", "estimate", "export", "corpus"} <= set(names)
    for name in names:
        command = root.get_command(ctx, name)
        assert f"kgcheck {name}</code>" in text, name
        sub = command.context_class(command, info_name=name, parent=ctx)
        for param in command.get_params(sub):
            for opt in param.opts if param.param_type_name == "option" else ():
                assert opt in text, f"kgcheck {name} {opt}"


def test_settings_reference_lists_every_strategy_setting(site: Path) -> None:
    import kgcheck

    text = html(site, "reference/settings")
    for name in kgcheck.strategies():
        assert f"<code>{name}</code>" in text, name
        for item in kgcheck.settings(name):
            assert f"<code>{item['name']}</code>" in text, f"{name}: {item['name']}"


def test_every_environment_variable_on_the_settings_page_is_read_by_the_code() -> None:
    page = (DOCS / "reference" / "settings.md").read_text(encoding="utf-8")
    table = page[page.index("## Environment variables"):]
    named = set(re.findall(r"`([A-Z][A-Z0-9_]{3,})`", table))
    assert {"KGCHECK_HOME", "OLLAMA_HOST", "OTEL_EXPORTER_OTLP_ENDPOINT"} <= named
    source = "\n".join(p.read_text(encoding="utf-8") for folder in ("kgcheck", "graphs",
                        "retrievers", "evals") for p in (ROOT / folder).rglob("*.py"))
    # Read by the libraries themselves, not by kgcheck's code: the OpenTelemetry SDK,
    # httpx's reading of the proxy variables, which kgcheck asks for by name below, and the
    # object store's client (fsspec's).
    by_libraries = {"OTEL_BSP_SCHEDULE_DELAY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                    "NO_PROXY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                    "AWS_ENDPOINT_URL"}
    assert "get_environment_proxies()" in source and "fsspec.core.url_to_fs" in source
    unread = sorted(v for v in named - by_libraries if v not in source)
    assert not unread, f"the settings page names variables no code reads: {unread}"
    read = set(re.findall(r'"(KGCHECK_[A-Z_]+)"', source))
    assert not read - named, f"the settings page lacks {sorted(read - named)}"


def test_run_folder_reference_names_every_file_and_field(site: Path, tmp_path: Path) -> None:
    import kgcheck
    from kgcheck.data import runfolder

    text = html(site, "reference/run-folder")
    # Every file name the run folder module declares (upper-case constants such as VERDICTS).
    names = {k: v for k, v in vars(runfolder).items()
             if k.isupper() and isinstance(v, str) and re.fullmatch(r"\.?[\w-]+\.\w+|\.lock", v)}
    assert {"verdicts.jsonl", "run.json", "labels.csv", ".lock"} <= set(names.values())
    for constant, name in names.items():
        assert f"<code>{name}</code>" in text, constant
    assert ",".join(runfolder.LABEL_COLUMNS) in text
    unexplained = [c for c in runfolder.LABEL_COLUMNS if f"<code>{c}</code>" not in text]
    assert not unexplained, f"labels.csv columns the page does not explain: {unexplained}"
    out = tmp_path / "run"
    kgcheck.run(dataset="yago", strategy="dka", model="replay:gemma2:9b", limit=2, out=out)
    record = json.loads((out / runfolder.VERDICTS).read_text().splitlines()[0])
    info = json.loads((out / runfolder.RUN_INFO).read_text())
    summary = json.loads((out / runfolder.SUMMARY).read_text())
    undocumented = [k for k in [*record, *info, *summary] if f"<code>{k}</code>" not in text]
    assert not undocumented, f"reference/run-folder.md does not describe {undocumented}"


def test_readme_is_short_and_links_the_site() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for command in ("make demo", "make test"):
        assert command in readme
    linked = set(re.findall(r"\(docs/([\w/.-]+\.md)", readme))
    assert linked and all((DOCS / page).is_file() for page in linked), linked
