"""Read evidence documents in the upstream layout: ``rag_dataset/<dataset>/<fact id>/<n>.txt``.

A source is a folder or a ``.tar.gz`` read as a stream (never extracted). Entries that are
links, or whose path is absolute or climbs out of the root, make the whole source invalid:
a corpus that contains them was not written by the upstream tooling. A document may start
with ``URL:`` / ``Title:`` header lines (then a blank line), and a fact folder may hold a
``sources.json`` mapping document numbers to ``{"url": ..., "title": ...}``; the upstream
files carry neither, so both are optional.

What is read is capped, decompressed: one document (``$KGCHECK_CORPUS_MAX_DOCUMENT_BYTES``,
16 MiB; the upstream corpora's largest is about 110 KB) and a whole source
(``$KGCHECK_CORPUS_MAX_BYTES``, 1 GiB; the FactBench archive decompresses to 180 MB). An
archive is decompressed through a counting reader, so a small archive that inflates past a
cap is refused as soon as it does, having held no more than the caps.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, cast
from urllib.parse import urlparse

from kgcheck.data.input_limits import Cap
from kgcheck.data.safe_json import loads

LAYOUT_ROOT = "rag_dataset"
SOURCES_FILE = "sources.json"
_HEADER = re.compile(r"^(url|title|source)\s*:\s*(.*)$", re.IGNORECASE)
DOCUMENT_BYTES = Cap("KGCHECK_CORPUS_MAX_DOCUMENT_BYTES", 16 * 2**20, "bytes")
SOURCE_BYTES = Cap("KGCHECK_CORPUS_MAX_BYTES", 2**30, "bytes")


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
    value = loads(_decode(data), where, CorpusError)
    if not isinstance(value, dict):
        raise CorpusError(f"{where}: expected an object of document number -> {{url, title}}")
    return {str(k): v for k, v in value.items() if isinstance(v, dict)}


class _CountingReader:
    """A decompressed stream that refuses to give more than ``limit`` bytes in all."""

    def __init__(self, stream: IO[bytes], limit: int, path: Path) -> None:
        self.stream = stream
        self.limit = limit
        self.path = path
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        # Never more than one byte past the cap at once: an unbounded read() is bounded too.
        room = self.limit + 1 - self.count
        data = self.stream.read(room if size is None or size < 0 else min(size, room))
        self.count += len(data)
        if self.count > self.limit:
            raise CorpusError(_too_large(self.path, "decompresses to", self.limit,
                                         SOURCE_BYTES))
        return data


def _too_large(where: Path | str, verb: str, limit: int, cap: Cap,
               size: int | None = None) -> str:
    """Say that an input is over a cap: ``<where>: <verb> [N bytes,] more than the cap``."""
    kind = "one document" if cap is DOCUMENT_BYTES else "a corpus source"
    known = f" {size:,} bytes," if size is not None else ""
    return (f"{where}: {verb}{known} more than the {limit:,}-byte cap on {kind} "
            f"(${cap.env} raises it)")


def _decompressing(raw: IO[bytes]) -> IO[bytes]:
    """Return the decompressed stream of an archive file by its magic bytes (gzip, bz2, xz)."""
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    if magic.startswith(b"BZh"):
        return cast(IO[bytes], bz2.BZ2File(raw))
    if magic.startswith(b"\xfd7zXZ\x00"):
        return cast(IO[bytes], lzma.LZMAFile(raw))
    return raw


def _member_bytes(archive: tarfile.TarFile, member: tarfile.TarInfo, path: Path,
                  limit: int) -> bytes:
    """Read one member, refusing one longer than the document cap before reading it."""
    where = f"{path}: member {member.name!r}"
    if member.size > limit:
        raise CorpusError(_too_large(where, "decompresses to", limit, DOCUMENT_BYTES,
                                     member.size))
    handle = archive.extractfile(member)
    data = handle.read(limit + 1) if handle else b""
    if len(data) > limit:
        raise CorpusError(_too_large(where, "decompresses to", limit, DOCUMENT_BYTES))
    return data


def iter_tarball(path: Path, dataset: str | None = None) -> Iterator[Document]:
    """Stream the documents of a ``.tar.gz`` in the upstream layout, one dataset or all.

    The archive is decompressed through a counting reader: past the source cap, or at a
    member past the document cap, it raises CorpusError.
    """
    wanted = dataset.lower() if dataset else None
    document_limit, source_limit = DOCUMENT_BYTES.value(), SOURCE_BYTES.value()
    # Documents of a fact are held back until its sources.json (if any) may have been seen.
    pending: dict[tuple[str, str], list[tuple[int, str]]] = {}
    sources: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    try:
        with path.open("rb") as packed, tarfile.open(
                fileobj=cast(IO[bytes], _CountingReader(_decompressing(packed), source_limit,
                                                        path)),
                mode="r|") as archive:
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
                data = _member_bytes(archive, member, path, document_limit)
                key = (name.lower(), fact_id)
                if filename == SOURCES_FILE:
                    sources[key] = _read_sources(data, where)
                    continue
                number = _doc_number(filename)
                if number is not None:
                    pending.setdefault(key, []).append((number, _decode(data)))
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError) as exc:
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
    """Read the documents of a folder in the upstream layout, one dataset or all.

    Past the source cap in all (the documents' text, as read), it raises CorpusError.
    """
    resolved = root.resolve()
    limit, total = SOURCE_BYTES.value(), 0
    for ds_dir in _dataset_dirs(root, dataset):
        _check_inside(ds_dir, resolved)
        for fact_dir in sorted(ds_dir.iterdir()):
            if not fact_dir.is_dir() or fact_dir.name.startswith("."):
                continue
            documents = fact_documents(fact_dir, ds_dir.name, resolved)
            total += sum(len(doc.text) for doc in documents)
            if total > limit:
                raise CorpusError(_too_large(root, "holds", limit, SOURCE_BYTES))
            yield from documents


def _file_bytes(path: Path) -> bytes:
    """Read a corpus file, refusing one longer than the document cap."""
    limit = DOCUMENT_BYTES.value()
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise CorpusError(_too_large(path, "holds", limit, DOCUMENT_BYTES))
    return data


def fact_documents(fact_dir: Path, dataset: str, root: Path | None = None) -> list[Document]:
    """Read one fact folder's documents, in document-number order."""
    root = root or fact_dir.resolve().parent.parent
    _check_inside(fact_dir, root)
    src_path = fact_dir / SOURCES_FILE
    sources = _read_sources(_file_bytes(src_path), str(src_path)) if src_path.is_file() else {}
    found = []
    for path in fact_dir.iterdir():
        number = _doc_number(path.name)
        if number is None:
            continue
        _check_inside(path, root)
        found.append((number, path))
    return [
        make_document(dataset, fact_dir.name, number, _decode(_file_bytes(path)), sources)
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
