import io
import shutil
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgcheck.retrievers.corpus import CorpusError, iter_documents, parse_header
from kgcheck.retrievers.store import CorpusStore, FolderSource, import_corpus, open_source

FIXTURE = Path(__file__).resolve().parents[2] / "vendored" / "sample-corpus"


def make_tarball(path: Path, root: Path = FIXTURE) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        archive.add(root / "rag_dataset", arcname="rag_dataset")
    return path


def add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def test_folder_import_keeps_ids_numbers_and_sources():
    docs = list(iter_documents(FIXTURE, "factbench"))
    by_id = {d.doc_id: d for d in docs}
    assert len(docs) == 8
    assert {d.fact_id for d in docs} == {"correct_birth_00126", "wrong_mix_range_birth_00026",
                                         "correct_award_00092"}
    header = by_id["factbench/correct_birth_00126/1"]
    assert header.url == "https://en.wikipedia.org/wiki/William_McKinley"
    assert header.domain == "en.wikipedia.org"
    assert header.title == "William McKinley - Wikipedia"
    assert header.text.startswith("William McKinley was the 25th president")
    sidecar = by_id["factbench/correct_award_00092/2"]
    assert sidecar.url.endswith("Nobel_Prize_in_Literature")
    plain = next(d for d in iter_documents(FIXTURE, "yago") if d.doc_id == "yago/10053/1")
    assert plain.url == "" and plain.link == "corpus://yago/10053/1"


def test_tarball_import_equals_folder_import(tmp_path):
    tarball = make_tarball(tmp_path / "rag_dataset-sample.tar.gz")
    from_tar = sorted(iter_documents(tarball), key=lambda d: d.doc_id)
    from_folder = sorted(iter_documents(FIXTURE), key=lambda d: d.doc_id)
    assert [(d.doc_id, d.text, d.url, d.title) for d in from_tar] == [
        (d.doc_id, d.text, d.url, d.title) for d in from_folder]
    assert {d.dataset for d in iter_documents(tarball, "YAGO")} == {"yago"}


@pytest.mark.parametrize("kind", ["parent", "absolute", "symlink", "hardlink"])
def test_crafted_tarball_is_rejected(tmp_path, kind):
    path = tmp_path / f"{kind}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        add_bytes(archive, "rag_dataset/yago/1/0.txt", b"A fine document.")
        if kind == "parent":
            add_bytes(archive, "rag_dataset/yago/../../evil/0.txt", b"escape")
        elif kind == "absolute":
            add_bytes(archive, "/etc/yago/1/1.txt", b"absolute")
        else:
            info = tarfile.TarInfo("rag_dataset/yago/1/1.txt")
            info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
            info.linkname = "/etc/passwd" if kind == "symlink" else "rag_dataset/yago/1/0.txt"
            archive.addfile(info)
    with pytest.raises(CorpusError, match="escapes|link") as err:
        list(iter_documents(path))
    assert str(path) in str(err.value)


def test_folder_with_a_symlinked_document_is_rejected(tmp_path):
    root = tmp_path / "corpus"
    shutil.copytree(FIXTURE, root)
    secret = tmp_path / "secret.txt"
    secret.write_text("not evidence")
    (root / "rag_dataset" / "yago" / "10019" / "99.txt").symlink_to(secret)
    with pytest.raises(CorpusError, match="link"):
        list(iter_documents(root, "yago"))


def test_missing_or_bad_source_errors_name_the_input(tmp_path):
    with pytest.raises(CorpusError, match="not found"):
        list(iter_documents(tmp_path / "nope"))
    bogus = tmp_path / "bogus.tar.gz"
    bogus.write_bytes(b"not a tarball")
    with pytest.raises(CorpusError, match="bogus.tar.gz"):
        list(iter_documents(bogus))
    assert issubclass(CorpusError, ValueError)


def test_header_needs_a_blank_line():
    text, meta = parse_header("URL: https://x.org/a\nTitle: A\n\nBody text.")
    assert meta == {"url": "https://x.org/a", "title": "A"} and text == "Body text."
    text, meta = parse_header("Title: not a header\nbecause no blank line follows")
    assert meta == {} and text.startswith("Title:")


def test_store_import_is_queryable_and_persistent(tmp_path):
    tarball = make_tarball(tmp_path / "sample.tar.gz")
    store, count = import_corpus(tarball, "yago", tmp_path / "corpus.sqlite")
    assert count == 14
    store.close()
    reopened = CorpusStore(tmp_path / "corpus.sqlite")
    assert reopened.datasets() == ["yago"]
    assert reopened.fact_ids("YAGO") == ["10019", "10053", "10143", "10185", "11726"]
    docs = reopened.documents("yago", "10143")
    assert [d.doc_no for d in docs] == [2, 5, 8]
    assert reopened.by_link("corpus://yago/10143/5").text.startswith("Alan Alda")
    assert reopened.by_link("https://example.org/people/arlene-alda").doc_no == 2
    assert reopened.documents("yago", "missing") == []
    with pytest.raises(CorpusError, match="no documents for dataset 'dbpedia'"):
        import_corpus(tarball, "dbpedia", tmp_path / "corpus.sqlite")


def test_open_source_resolves_folder_tarball_store_and_default(tmp_path, monkeypatch):
    monkeypatch.setenv("KGCHECK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KGCHECK_CORPUS", raising=False)
    assert isinstance(open_source(str(FIXTURE)), FolderSource)
    tarball = make_tarball(tmp_path / "sample.tar.gz")
    assert open_source(str(tarball)).documents("yago", "10019")[0].doc_no == 3
    # Nothing imported yet: the shipped sample corpus answers.
    assert open_source("", dataset="yago").fact_ids("yago")
    import_corpus(FIXTURE, "factbench")
    assert open_source("", dataset="factbench").location.endswith("corpus.sqlite")
    with pytest.raises(CorpusError, match="not a folder"):
        open_source(str(tmp_path / "nothing.txt"))
    # A registered source by name; an unknown name lists the known ones.
    assert isinstance(open_source(f"folder:{FIXTURE}"), FolderSource)
    assert open_source(f"store:{tmp_path / 'home' / 'corpus.sqlite'}").fact_ids("factbench")
    with pytest.raises(CorpusError, match="not a folder"):
        open_source("nosuchsource:x")


def test_cli_corpus_import_and_list(tmp_path, monkeypatch):
    from kgcheck.cli import app

    monkeypatch.setenv("KGCHECK_HOME", str(tmp_path))
    runner = CliRunner()
    result = runner.invoke(app, ["corpus", "import", "--dataset", "yago", "--from", str(FIXTURE)])
    assert result.exit_code == 0, result.output
    assert "imported 14 documents" in result.output
    result = runner.invoke(app, ["corpus", "list"])
    assert result.exit_code == 0 and "yago" in result.output
    bad = runner.invoke(app, ["corpus", "import", "--dataset", "yago", "--from",
                              str(tmp_path / "missing")])
    assert bad.exit_code == 2 and "not found" in bad.output
