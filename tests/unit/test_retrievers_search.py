from pathlib import Path

import numpy as np
import pytest

from kgcheck.retrievers.chunking import split_sentences
from kgcheck.retrievers.corpus import Document
from kgcheck.retrievers.embeddings import EmbeddingError, get_embedder
from kgcheck.retrievers.evidence import RetrievalError, Retriever, drop_domains, own_source_domains
from kgcheck.retrievers.index import MemoryIndex
from kgcheck.retrievers.lexical import LexicalIndex, tokenize
from kgcheck.retrievers.search.engine import merge_hits
from kgcheck.retrievers.selection import SelectionError, get_selector
from kgcheck.retrievers.store import CorpusStore

FIXTURE = Path(__file__).resolve().parents[2] / "vendored" / "sample-corpus"

# A handmade fact: several pages name both people; only one says they married.
PAGES = [
    "Rosa Lindqvist is a Swedish architect. She designed the harbour library in Malmo. "
    "Her brother Erik Sandberg is a sailor.",
    "Erik Sandberg sailed around the world twice. He met Rosa Lindqvist at a conference "
    "about harbours, and they became friends.",
    "In 2004 the architect Rosa Lindqvist married the sailor Erik Sandberg in Gothenburg. "
    "The wedding took place on a boat.",
    "Malmo has a long coastline with many harbours. Architects from all over Sweden "
    "compete for projects there.",
]


@pytest.fixture(scope="module")
def retriever():
    store = CorpusStore()
    store.add(Document("demo", "f1", n, text) for n, text in enumerate(PAGES))
    return Retriever(store, get_embedder("minilm"), index="memory")


def test_minilm_embeddings_are_real_and_normalised():
    embedder = get_embedder("minilm")
    vectors = embedder.embed(["A cat sits on the mat.", "A kitten is sitting on a rug.",
                              "Interest rates rose in the third quarter."])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > 0.5 > vectors[0] @ vectors[2]
    # The cache returns the very same vectors for repeated texts.
    assert np.array_equal(embedder.embed(["A cat sits on the mat."])[0], vectors[0])


def test_unknown_embedder_and_selector_are_clear_errors():
    with pytest.raises(EmbeddingError, match="unknown embedder 'bogus'; known: .*minilm"):
        get_embedder("bogus")
    with pytest.raises(EmbeddingError, match="ollama embeddings need a model"):
        get_embedder("ollama")
    with pytest.raises(SelectionError, match="unknown document selector 'nope'; known: .*fusion"):
        get_selector("nope")
    with pytest.raises(SelectionError, match="cross-encoder needs a model"):
        get_selector("cross-encoder")


def test_the_document_stating_the_fact_ranks_first(retriever):
    for query in ("Rosa Lindqvist is married to Erik Sandberg.",
                  "Who is Rosa Lindqvist's husband?"):
        hits = retriever.search(query, "demo", "f1")
        assert hits[0].doc_id == "demo/f1/2", (query, [h.doc_id for h in hits])
        assert [h.rank for h in hits] == [1, 2, 3, 4]
        assert hits[-1].doc_id == "demo/f1/3"
    assert retriever.search("anything", "demo", "unknown") == []


def test_chunks_rank_the_stating_sentence_first_with_windows(retriever):
    query = "Rosa Lindqvist is married to Erik Sandberg."
    chunks = retriever.chunks(query, "demo", "f1", None, window=1)
    assert chunks[0].chunk_id == "demo/f1/2#0"
    assert chunks[0].sentence.startswith("In 2004 the architect")
    # Window 1: the sentence and its neighbour in the same page.
    assert chunks[0].text.endswith("The wedding took place on a boat.")
    assert all(c.similarity >= 0.3 for c in chunks) and len(chunks) <= 6
    dense = retriever.chunks(query, "demo", "f1", None, window=0, mode="dense")
    assert dense[0].chunk_id == "demo/f1/2#0" and dense[0].text == dense[0].sentence
    only = retriever.chunks(query, "demo", "f1", ["demo/f1/3"], window=0, cutoff=-1.0)
    assert {c.doc_id for c in only} == {"demo/f1/3"}
    assert retriever.chunks(query, "demo", "f1", None, cutoff=0.99) == []
    with pytest.raises(RetrievalError, match="retrieval mode"):
        retriever.chunks(query, "demo", "f1", None, mode="sparse")


def test_vectors_are_embedded_once_and_reused(retriever):
    vectors = retriever.vectors("demo")
    retriever.chunks("Erik Sandberg sailed around the world.", "demo", "f1", None)
    before = vectors.embedded
    retriever.chunks("Erik Sandberg sailed around the world.", "demo", "f1", None)
    assert vectors.embedded == before
    assert isinstance(vectors.index, MemoryIndex)


def test_merge_hits_and_domain_filter():
    store = CorpusStore()
    store.add(iter(fixture_docs()))
    r = Retriever(store, get_embedder("minilm"), index="memory")
    a = r.search("William McKinley was born in Niles, Ohio.", "factbench", "correct_birth_00126")
    b = r.search("Where was McKinley born?", "factbench", "correct_birth_00126")
    merged = merge_hits([a, b])
    assert sorted(h.doc_id for h in merged) == sorted(h.doc_id for h in a)
    assert [h.rank for h in merged] == list(range(1, len(merged) + 1))
    kept, dropped = drop_domains(merged, own_source_domains("FactBench"))
    assert [h.domain for h in dropped] == ["en.wikipedia.org"]
    assert all("wikipedia" not in h.domain for h in kept)
    assert own_source_domains("yago") == ()
    assert own_source_domains("yago", "a.org, www.b.com") == ("a.org", "b.com")
    assert own_source_domains("dbpedia", "none") == ()
    assert get_selector("fusion").select("q", merged, r.documents("factbench",
                                         "correct_birth_00126"), 2) == merged[:2]


def fixture_docs():
    from kgcheck.retrievers.corpus import iter_documents

    return iter_documents(FIXTURE, "factbench")


def test_sentence_splitting_and_tokens():
    text = "Dr. Jones arrived. He was born in 1950! \"Quoted.\" Next\n\nA new paragraph"
    assert split_sentences(text) == ["Dr. Jones arrived.", "He was born in 1950!",
                                     '"Quoted."', "Next", "A new paragraph"]
    long = " ".join(["word"] * 300)
    assert all(len(s) <= 400 for s in split_sentences(long))
    assert tokenize("The Gaytán family IS home") == ["gaytan", "family", "home"]


def test_lexical_index_scores_and_empty_texts():
    index = LexicalIndex(["Eduardo Capetillo married Bibi Gaytan", "the of and", "a cat"])
    scores = index.scores("Bibi Gaytán")
    assert scores[0] > 0 and scores[1] == 0 and scores[2] == 0
    assert index.top("cat", 5) == [(2, pytest.approx(float(index.scores("cat")[2])))]
    assert LexicalIndex([]).scores("x").shape == (0,)
