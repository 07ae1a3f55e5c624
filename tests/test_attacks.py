"""Hostile inputs that once lost data or escaped their bounds, each refused or contained.

Run alone with ``pytest tests/test_attacks.py``. Each section is one attack: a correction
export that could wipe a KG, an explorer index pointing outside its run, JSON-LD contexts
fetched from the network, entity expansion in rule inputs, archives and lines too large.
Memory caps are measured by a child process's peak RSS, not assumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# --- 1. Correction exports: fact ids and free text cannot inject SPARQL Update ---------------



# --- 2. The explorer's index cannot point outside the run folder ---------------------------



# --- 3. JSON-LD shapes cannot fetch a remote or file context -------------------------------



# --- 4. Entity expansion in every RDF/XML reader -------------------------------------------



# --- 5. Corpus import caps the decompressed size --------------------------------------------

class _Zeros:
    """A file of ``size`` zero bytes, read in pieces (never held whole)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def _corpus_archive(path: Path, members: dict[str, int]) -> Path:
    """Write a .tar.gz of rag_dataset/yago/<fact>/<n>.txt members of so many zero bytes."""
    import tarfile

    with tarfile.open(path, "w:gz", compresslevel=1) as archive:
        for name, size in members.items():
            info = tarfile.TarInfo(f"rag_dataset/yago/{name}")
            info.size = size
            archive.addfile(info, _Zeros(size))  # type: ignore[arg-type]
    return path


def test_corpus_import_refuses_a_member_that_inflates_past_the_cap(tmp_path: Path) -> None:
    from tests.child_peak import run_kgcheck

    member = 256 * 2**20
    bomb = _corpus_archive(tmp_path / "bomb.tar.gz",
                           {"f1/0.txt": 1000, "f1/1.txt": member, "f2/0.txt": 1000})
    assert bomb.stat().st_size < 2 * 2**20  # a small archive, a large member
    bad = run_kgcheck(["corpus", "import", "--dataset", "yago", "--from", str(bomb),
                       "--store", "bad.sqlite"], tmp_path,
                      {"KGCHECK_CORPUS_MAX_DOCUMENT_BYTES": str(2**20)})
    assert bad.code == 2
    (line,) = bad.stderr.strip().splitlines()
    assert "bomb.tar.gz: member 'rag_dataset/yago/f1/1.txt': decompresses to 268,435,456" in line
    assert "KGCHECK_CORPUS_MAX_DOCUMENT_BYTES" in line
    assert not (tmp_path / "bad.sqlite").exists()
    # Reading the member would hold its bytes and its text, each as large as the member.
    assert bad.peak_bytes < member, bad.peak_bytes


def test_corpus_import_refuses_a_source_past_the_total_cap(tmp_path: Path,
                                                           monkeypatch: Any) -> None:
    from kgcheck.retrievers.corpus import CorpusError
    from kgcheck.retrievers.store import import_corpus

    many = _corpus_archive(tmp_path / "many.tar.gz", {f"f{n}/0.txt": 2**20 for n in range(12)})
    monkeypatch.setenv("KGCHECK_CORPUS_MAX_BYTES", str(4 * 2**20))
    with pytest.raises(CorpusError, match=r"many\.tar\.gz: decompresses to more than the "
                       r"4,194,304-byte cap on a corpus source \(\$KGCHECK_CORPUS_MAX_BYTES"):
        import_corpus(many, "yago", tmp_path / "s.sqlite")
    assert not (tmp_path / "s.sqlite").exists()


def test_a_refused_import_leaves_an_existing_store_as_it_was(tmp_path: Path,
                                                            monkeypatch: Any) -> None:
    from kgcheck.retrievers.corpus import CorpusError
    from kgcheck.retrievers.store import CorpusStore, import_corpus

    good = _corpus_archive(tmp_path / "good.tar.gz", {"f1/0.txt": 10, "f1/1.txt": 10})
    bad = _corpus_archive(tmp_path / "bad.tar.gz",
                          {**{f"f{n}/0.txt": 10 for n in range(600)}, "f9/9.txt": 5000})
    store_path = tmp_path / "corpus.sqlite"
    import_corpus(good, "yago", store_path)[0].close()
    monkeypatch.setenv("KGCHECK_CORPUS_MAX_DOCUMENT_BYTES", "1000")
    # More documents than one batch come before the refusal: none of them is kept, and
    # --replace's deletion is undone.
    with pytest.raises(CorpusError, match="cap on one document"):
        import_corpus(bad, "yago", store_path, replace=True)
    store = CorpusStore(store_path)
    assert store.counts() == {"yago": (1, 2)}
    store.close()




# --- 6. A line too long is refused with one line naming the input ----------------------------

def _verdict_lines(path: Path, line: str) -> Path:
    """Write a JSON Lines verdicts file whose second line is ``line``."""
    path.write_text('{"fact_id": "f1", "label": "T"}\n' + line + "\n")
    return path


def test_import_refuses_a_line_past_the_cap_without_reading_it(tmp_path: Path) -> None:
    from tests.child_peak import run_kgcheck

    (tmp_path / "facts.jsonl").write_text(
        '{"id": "f1", "subject": "a", "predicate": "p", "object": "b", "label": "T"}\n'
        '{"id": "f2", "subject": "c", "predicate": "p", "object": "d", "label": "F"}\n')
    # One line of 200 MB: a model name that run.json, the summary and every verdict repeat.
    size = 200 * 2**20
    with (tmp_path / "huge.jsonl").open("w") as fh:
        fh.write('{"fact_id": "f1", "label": "T"}\n{"fact_id": "f2", "label": "F", "model": "')
        for _ in range(size // 2**20):
            fh.write("m" * 2**20)
        fh.write('"}\n')
    bad = run_kgcheck(["import", "huge.jsonl", "--triples", "facts.jsonl", "--out", "bad"],
                      tmp_path)
    assert bad.code == 2
    (line,) = bad.stderr.strip().splitlines()
    assert "huge.jsonl, line 2: longer than 1,048,576 bytes" in line
    assert "KGCHECK_MAX_LINE_BYTES" in line
    assert not (tmp_path / "bad" / "verdicts.jsonl").exists()
    # Reading the line would hold its bytes, its text and its JSON: three times the line.
    assert bad.peak_bytes < size, bad.peak_bytes


def test_a_lowered_line_cap_applies_to_triples_and_labels(tmp_path: Path,
                                                          monkeypatch: Any) -> None:
    from kgcheck.data.labels import LabelsError, read_labels
    from kgcheck.data.triples import TriplesError, read_triples

    row = '{"id": "f1", "subject": "a", "predicate": "p", "object": "%s"}' % ("o" * 5000)
    (tmp_path / "facts.jsonl").write_text('{"id": "f0", "subject": "a", "predicate": "p", '
                                          '"object": "b"}\n' + row + "\n")
    (tmp_path / "labels.csv").write_text("fact_id,label\nf0,T\nf1,%s\n" % ("T" * 5000))
    assert len(read_triples(tmp_path / "facts.jsonl")) == 2
    monkeypatch.setenv("KGCHECK_MAX_LINE_BYTES", "4096")
    with pytest.raises(TriplesError, match=r"facts\.jsonl, line 2: longer than 4,096 bytes"):
        read_triples(tmp_path / "facts.jsonl")
    with pytest.raises(LabelsError, match=r"labels\.csv, line 3: longer than 4,096 bytes"):
        read_labels(tmp_path / "labels.csv")


def test_a_model_name_past_the_name_cap_is_refused(tmp_path: Path) -> None:
    from kgcheck.runs.importing import VerdictImportError, read_verdict_file

    path = _verdict_lines(tmp_path / "v.jsonl",
                          '{"fact_id": "f2", "label": "F", "model": "%s"}' % ("m" * 5000))
    with pytest.raises(VerdictImportError, match=r"v\.jsonl, line 2: the model name is 5,000 "
                       r"characters long, more than 1,000 \(\$KGCHECK_MAX_NAME_CHARS"):
        read_verdict_file(path)
    answer = tmp_path / "YAGO_open-source_m_dka.json"
    answer.write_text('[{"id": "f1", "response": "T", "full_answer": "%s"}]' % ("x" * 200_001))
    with pytest.raises(VerdictImportError, match=r"record 0: the answer is 200,001 characters"):
        read_verdict_file(answer)



