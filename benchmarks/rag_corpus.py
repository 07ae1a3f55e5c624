"""The YAGO evidence corpus the RAG benchmarks read: where it is, how to ask for it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARBALL = ROOT.parent / "shared" / "factcheck-data" / "rag_dataset-yago.tar.gz"
# The exit status of a benchmark that cannot run here (automake's "skipped" code);
# benchmarks/run_all.py reports it as skipped, not as a failure.
SKIPPED = 77
HOW_TO_GET = ("it is the rag_dataset/yago/ folder of the upstream FactCheck repository "
              "(https://github.com/FactCheck-AI/FactCheck), as a folder or packed as "
              "rag_dataset-yago.tar.gz; pass it with --corpus PATH")


def skip(reason: str) -> NoReturn:
    """Print a ``skipped`` JSON record naming the reason, and exit with ``SKIPPED``."""
    name = Path(sys.argv[0]).stem.removeprefix("bench_")
    print(json.dumps({"benchmark": name, "skipped": reason}, indent=1))
    sys.exit(SKIPPED)


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
    if not corpus.exists() and corpus == TARBALL:
        # Nothing was asked for: the study's corpus is simply not on this machine.
        skip(f"the YAGO evidence corpus is not at {corpus}; {HOW_TO_GET}")
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
