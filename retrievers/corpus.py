"""Read evidence documents in the upstream layout: ``rag_dataset/<dataset>/<fact id>/<n>.txt``.

A source is a folder or a ``.tar.gz`` read as a stream (never extracted). Entries that are
links, or whose path is absolute or climbs out of the root, make the whole source invalid:
a corpus that contains them was not written by the upstream tooling. A document may start
with ``URL:`` / ``Title:`` header lines (then a blank line), and a fact folder may hold a
``sources.json`` mapping document numbers to ``{"url": ..., "title": ...}``; the upstream
files carry neither, so both are optional.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

LAYOUT_ROOT = "rag_dataset"
SOURCES_FILE = "sources.json"
_HEADER = re.compile(r"^(url|title|source)\s*:\s*(.*)$", re.IGNORECASE)


class CorpusError(ValueError):
    """A corpus source that is missing, unsafe or not in the upstream layout."""


@dataclass(frozen=True)
class Document:
    """One evidence document of a fact, as the search step returns it."""

    dataset: str
    fact_id: str
    doc_no: int
    text: str
    url: str = ""
    title: str = ""
    meta: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def doc_id(self) -> str:
        """The document's id: ``<dataset>/<fact id>/<n>``."""
        return doc_id(self.dataset, self.fact_id, self.doc_no)

    @property
    def domain(self) -> str:
        """The host of the document's source URL, without ``www.``; empty when unknown."""
        return url_domain(self.url)

    @property
    def link(self) -> str:
        """The source URL, or a ``corpus://`` address when the source gave none."""
        return self.url or f"corpus://{self.doc_id}"


def doc_id(dataset: str, fact_id: str, doc_no: int) -> str:
    """Build a document id; the dataset is lower-case, as in the upstream folders."""
    return f"{dataset.lower()}/{fact_id}/{doc_no}"


def parse_corpus_link(link: str) -> tuple[str, str, int] | None:
    """Split a ``corpus://<dataset>/<fact id>/<n>`` address (``Document.link``) into its parts."""
    if not link.startswith("corpus://"):
        return None
    dataset, _, rest = link[len("corpus://"):].partition("/")
    fact_id, _, number = rest.rpartition("/")
    if not dataset or not fact_id or not number.isdigit():
        return None
    return dataset, fact_id, int(number)


def url_domain(url: str) -> str:
    """Return the host of ``url`` without a leading ``www.``; empty for non-web addresses."""
    if not url.startswith(("http://", "https://")):
        return ""
    host = (urlparse(url).hostname or "").lower()
    return host[4:] if host.startswith("www.") else host


def parse_header(raw: str) -> tuple[str, dict[str, str]]:
    """Split optional ``URL:``/``Title:`` header lines from a document's text."""
    lines = raw.split("\n")
    meta: dict[str, str] = {}
    n = 0
    while n < len(lines) and (match := _HEADER.match(lines[n].strip())):
        key = match[1].lower()
        meta["url" if key == "source" else key] = match[2].strip()
        n += 1
    if meta and n < len(lines) and not lines[n].strip():
        return "\n".join(lines[n + 1:]).strip(), meta
    # Not a header block (no blank line after it): the lines are ordinary text.
    return raw.strip(), {}


def make_document(dataset: str, fact_id: str, doc_no: int, raw: str,
                  sources: dict[str, dict[str, str]] | None = None) -> Document:
    """Build a document from a file's text, merging header and ``sources.json`` metadata."""
    text, meta = parse_header(raw)
    extra = (sources or {}).get(str(doc_no), {})
    return Document(
        dataset=dataset.lower(), fact_id=fact_id, doc_no=doc_no, text=text,
        url=str(meta.get("url") or extra.get("url") or ""),
        title=str(meta.get("title") or extra.get("title") or ""),
    )


def _layout_parts(rel: PurePosixPath, where: str) -> list[str]:
    """Check a relative entry path and drop a leading ``rag_dataset`` component."""
    if rel.is_absolute() or ".." in rel.parts:
        raise CorpusError(f"{where}: entry {str(rel)!r} escapes the corpus root; refusing it")
    parts = [p for p in rel.parts if p not in ("", ".")]
    if parts and parts[0] == LAYOUT_ROOT:
        parts = parts[1:]
    return parts


def _doc_number(name: str) -> int | None:
    stem, dot, ext = name.rpartition(".")
    if dot and ext == "txt" and stem.isdigit():
        return int(stem)
    return None


def _decode(data: bytes) -> str:
    # Scraped pages hold the odd broken byte; keep the text rather than fail the import.
    return data.decode("utf-8", errors="replace")


def _read_sources(data: bytes, where: str) -> dict[str, dict[str, str]]:
    try:
        value = json.loads(_decode(data))
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{where}: malformed JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(value, dict):
        raise CorpusError(f"{where}: expected an object of document number -> {{url, title}}")
    return {str(k): v for k, v in value.items() if isinstance(v, dict)}


def iter_tarball(path: Path, dataset: str | None = None) -> Iterator[Document]:
    """Stream the documents of a ``.tar.gz`` in the upstream layout, one dataset or all."""
    wanted = dataset.lower() if dataset else None
    # Documents of a fact are held back until its sources.json (if any) may have been seen.
    pending: dict[tuple[str, str], list[tuple[int, str]]] = {}
    sources: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    try:
        with tarfile.open(path, mode="r|*") as archive:
            for member in archive:
                where = f"{path}: {member.name}"
                if member.issym() or member.islnk():
                    raise CorpusError(f"{where} is a link; a corpus archive must hold plain files")
                parts = _layout_parts(PurePosixPath(member.name), str(path))
                if member.isdir():
                    continue
                if not member.isfile():
                    raise CorpusError(f"{where} is not a regular file")
                if len(parts) != 3:
                    continue
                name, fact_id, filename = parts
                if wanted and name.lower() != wanted:
                    continue
                handle = archive.extractfile(member)
                data = handle.read() if handle else b""
                key = (name.lower(), fact_id)
                if filename == SOURCES_FILE:
                    sources[key] = _read_sources(data, where)
                    continue
                number = _doc_number(filename)
                if number is not None:
                    pending.setdefault(key, []).append((number, _decode(data)))
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CorpusError(f"{path}: not a readable tar archive ({exc})") from None
    for (name, fact_id), docs in pending.items():
        for number, raw in sorted(docs):
            yield make_document(name, fact_id, number, raw, sources.get((name, fact_id)))


def _dataset_dirs(root: Path, dataset: str | None) -> list[Path]:
    """Find the dataset folders below ``root`` (the layout root, rag_dataset/, or one dataset)."""
    base = root / LAYOUT_ROOT if (root / LAYOUT_ROOT).is_dir() else root
    if dataset and base.name.lower() == dataset.lower() and not (base / dataset).is_dir():
        return [base]
    dirs = [d for d in sorted(base.iterdir()) if d.is_dir() and not d.is_symlink()]
    if dataset:
        dirs = [d for d in dirs if d.name.lower() == dataset.lower()]
    return dirs


def _check_inside(path: Path, root: Path) -> None:
    if path.is_symlink():
        raise CorpusError(f"{path} is a link; a corpus folder must hold plain files")
    if not path.resolve().is_relative_to(root):
        raise CorpusError(f"{path} escapes the corpus root {root}; refusing it")


def iter_folder(root: Path, dataset: str | None = None) -> Iterator[Document]:
    """Read the documents of a folder in the upstream layout, one dataset or all."""
    resolved = root.resolve()
    for ds_dir in _dataset_dirs(root, dataset):
        _check_inside(ds_dir, resolved)
        for fact_dir in sorted(ds_dir.iterdir()):
            if not fact_dir.is_dir() or fact_dir.name.startswith("."):
                continue
            yield from fact_documents(fact_dir, ds_dir.name, resolved)


def fact_documents(fact_dir: Path, dataset: str, root: Path | None = None) -> list[Document]:
    """Read one fact folder's documents, in document-number order."""
    root = root or fact_dir.resolve().parent.parent
    _check_inside(fact_dir, root)
    src_path = fact_dir / SOURCES_FILE
    sources = _read_sources(src_path.read_bytes(), str(src_path)) if src_path.is_file() else {}
    found = []
    for path in fact_dir.iterdir():
        number = _doc_number(path.name)
        if number is None:
            continue
        _check_inside(path, root)
        found.append((number, path))
    return [
        make_document(dataset, fact_dir.name, number, _decode(path.read_bytes()), sources)
        for number, path in sorted(found)
    ]


def is_tarball(path: Path) -> bool:
    """Tell whether ``path`` names a tar archive (``.tar``, ``.tar.gz``, ``.tgz``)."""
    return path.is_file() and path.name.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"))


def iter_documents(source: str | Path, dataset: str | None = None) -> Iterator[Document]:
    """Yield the documents of a folder or tarball in the upstream layout."""
    path = Path(os.path.expanduser(str(source)))
    if not path.exists():
        raise CorpusError(f"{path}: corpus source not found (a folder or .tar.gz in the "
                          f"{LAYOUT_ROOT}/<dataset>/<fact id>/<n>.txt layout)")
    if path.is_dir():
        yield from iter_folder(path, dataset)
    elif is_tarball(path):
        yield from iter_tarball(path, dataset)
    else:
        raise CorpusError(f"{path}: expected a folder or a .tar.gz archive")
