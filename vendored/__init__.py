"""The compact data kgcheck ships, installed as ``kgcheck.vendored``.

- ``factcheck/``: the FactBench, YAGO and DBpedia triples, gold labels, sentences and every
  recorded answer of the FactCheck study, as gzipped bundles in the upstream layout
  (FactCheck-AI/FactCheck, MIT licence; ``factcheck/manifest.json`` lists each bundle).
- ``models/all-minilm-l6-v2/``: the tokenizer of the default embedder (Apache-2.0).
- ``sample-corpus/``: short evidence documents written for the tests and demos.

This is the one place that knows where those files are, whether kgcheck runs from a
clone or from an installed wheel.
"""

from __future__ import annotations

from pathlib import Path

VENDORED_ROOT = Path(__file__).resolve().parent
FACTCHECK_DIR = VENDORED_ROOT / "factcheck"
MINILM_TOKENIZER = VENDORED_ROOT / "models" / "all-minilm-l6-v2" / "tokenizer.json.gz"
SAMPLE_CORPUS = VENDORED_ROOT / "sample-corpus"
