"""Group explanations: embed them, reduce with UMAP, cluster with HDBSCAN, name by c-TF-IDF.

As in the study: explanation vectors (kgcheck's embedder registry, MiniLM offline by
default) are reduced by UMAP (umap-learn, cosine metric) and clustered by HDBSCAN
(scikit-learn's); points HDBSCAN leaves out are noise, cluster -1. UMAP runs with a
``random_state``, which also makes it single-threaded: the same explanations and seed
give the same clusters. A second UMAP to two dimensions places the points of the scatter
plot.

A cluster's keywords are its top terms by class-based TF-IDF (BERTopic's c-TF-IDF, with
scikit-learn's CountVectorizer): a term's frequency in the cluster, weighted by
``log(1 + A / f)``, A the mean number of words per cluster and f the term's frequency
over all clusters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgcheck.evals.errors.outputs import ErrorsInputError
from kgcheck.evals.figure_text import plain_text

__all__ = ["Clustering", "cluster_explanations", "ctfidf_keywords", "embed", "scatter_plot"]

# Fewer explanations than this cannot be reduced and clustered meaningfully.
MIN_POINTS = 6


def _missing(package: str) -> ErrorsInputError:
    return ErrorsInputError(f"{package} is not installed: pip install 'kgcheck[errors]'")


def embed(texts: Sequence[str], spec: str) -> np.ndarray:
    """Embed texts with the registry's embedder ``spec``; a clear error when it cannot load."""
    from kgcheck.retrievers.embeddings import EmbeddingError, get_embedder

    try:
        embedder = get_embedder(spec)
        return np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    except EmbeddingError as exc:
        raise ErrorsInputError(f"--embedder {spec}: {exc}") from None
    except ImportError as exc:
        raise ErrorsInputError(f"--embedder {spec} is not installed ({exc.name or exc}); "
                               "install it, or use the default minilm") from None


@dataclass
class Clustering:
    """Cluster per explanation (-1: noise), 2-D coordinates, and what produced them."""

    labels: list[int]
    points: list[tuple[float, float]]
    settings: dict[str, Any]


def _umap(vectors: np.ndarray, dims: int, seed: int, neighbours: int) -> np.ndarray:
    try:
        import umap
    except ImportError:
        raise _missing("umap-learn") from None
    reducer = umap.UMAP(n_components=dims, n_neighbors=neighbours, min_dist=0.0,
                        metric="cosine", random_state=seed, n_jobs=1)
    return np.asarray(reducer.fit_transform(vectors), dtype=np.float64)


def cluster_explanations(vectors: np.ndarray, *, seed: int = 0, dims: int = 5,
                         neighbours: int = 15, min_cluster_size: int = 5) -> Clustering:
    """Reduce and cluster explanation vectors (seeded: same input, same clusters)."""
    n = len(vectors)
    if n < MIN_POINTS:
        raise ErrorsInputError(f"only {n} explanation(s): clustering needs at least "
                               f"{MIN_POINTS}; analyse more runs or raise --max-errors")
    try:
        from sklearn.cluster import HDBSCAN
    except ImportError:
        raise _missing("scikit-learn") from None
    neighbours = max(2, min(neighbours, n - 1))
    dims = max(2, min(dims, n - 2))
    reduced = _umap(vectors, dims, seed, neighbours)
    size = max(2, min(min_cluster_size, n // 2))
    labels = HDBSCAN(min_cluster_size=size, copy=True).fit_predict(reduced)
    flat = _umap(vectors, 2, seed, neighbours) if dims != 2 else reduced
    return Clustering(
        labels=[int(x) for x in labels], points=[(float(x), float(y)) for x, y in flat],
        settings={"umap": {"n_components": dims, "n_neighbors": neighbours, "min_dist": 0.0,
                           "metric": "cosine", "random_state": seed},
                  "hdbscan": {"min_cluster_size": size}, "seed": seed})


def ctfidf_keywords(texts: Sequence[str], labels: Sequence[int], top: int = 5
                    ) -> dict[int, list[str]]:
    """Return each cluster's top terms by class-based TF-IDF (noise, -1, included)."""
    from sklearn.feature_extraction.text import CountVectorizer

    clusters = sorted(set(labels))
    docs = [" ".join(t for t, c in zip(texts, labels, strict=True) if c == k) for k in clusters]
    try:
        vectorizer = CountVectorizer(stop_words="english", ngram_range=(1, 2), min_df=1)
        counts = vectorizer.fit_transform(docs).toarray().astype(float)
    except ValueError:  # every word a stop word
        return {k: [] for k in clusters}
    terms = vectorizer.get_feature_names_out()
    words_per_class = counts.sum(axis=1)
    tf = counts / np.maximum(words_per_class[:, None], 1.0)
    idf = np.log(1.0 + words_per_class.mean() / np.maximum(counts.sum(axis=0), 1.0))
    scores = tf * idf
    return {k: [str(terms[j]) for j in np.argsort(-scores[i], kind="stable")[:top]
                if scores[i, j] > 0]
            for i, k in enumerate(clusters)}


@plain_text
def scatter_plot(clustering: Clustering, names: dict[int, str], out_dir: Path,
                 stem: str) -> list[Path]:
    """Draw the 2-D UMAP of the explanations, one colour per cluster, noise in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kgcheck.data.atomic import atomic_output

    fig, ax = plt.subplots(figsize=(8, 6))
    palette = matplotlib.color_sequences["tab20"]
    points = np.asarray(clustering.points)
    labels = np.asarray(clustering.labels)
    for i, k in enumerate(sorted(set(clustering.labels))):
        mask = labels == k
        colour = "#bbbbbb" if k == -1 else palette[i % len(palette)]
        name = "noise" if k == -1 else f"{k}: {names.get(k, '')}"
        ax.scatter(points[mask, 0], points[mask, 1], s=18, color=colour,
                   label=f"{name} ({int(mask.sum())})", edgecolor="none")
    ax.set_xlabel("UMAP 1")
    ax.set_ylabel("UMAP 2")
    ax.set_title(f"{len(labels)} error explanations, by cluster")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    paths = []
    for fmt in ("png", "svg"):
        path = out_dir / f"{stem}.{fmt}"
        with atomic_output(path) as handle:
            fig.savefig(handle, format=fmt, dpi=150, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths
