"""The YAGO evidence corpus the RAG benchmarks read: where it is, how to ask for it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARBALL = ROOT.parent / "shared" / "factcheck-data" / "rag_dataset-yago.tar.gz"


def corpus_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--corpus PATH`` (``--tarball`` is its older name)."""
    parser.add_argument("--corpus", "--tarball", dest="corpus", metavar="PATH",
                        default=str(TARBALL),
                        help="YAGO evidence corpus: a .tar.gz or folder in the upstream "
                             "layout")


def fail(message: str) -> NoReturn:
    """Print one error line on stderr and exit 2, the way kgcheck reports bad input."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def check_corpus(path: str) -> Path:
    """Return the corpus path, or stop with one line naming it and the option to change it."""
    corpus = Path(path).expanduser()
    if not corpus.exists():
        fail(f"corpus not found: {corpus} (give the YAGO evidence tarball "
             "rag_dataset-yago.tar.gz or its folder with --corpus PATH)")
    return corpus


def import_or_fail(corpus: Path, store_path: Path) -> tuple[Any, int]:
    """Import the YAGO documents into a store; a corpus without them stops with one line."""
    from kgcheck.retrievers.corpus import CorpusError
    from kgcheck.retrievers.store import import_corpus

    try:
        return import_corpus(corpus, "yago", store_path)
    except CorpusError as exc:
        fail(f"--corpus {exc}")
