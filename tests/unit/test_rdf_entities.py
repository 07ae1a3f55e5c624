"""RDF/XML's DTD entities: plain abbreviations are read, expanding ones are refused."""

from __future__ import annotations

import io
from pathlib import Path

import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data import xml_guard
from kgcheck.data.rdf import RdfReader
from kgcheck.data.sources import TriplesError
from kgcheck.data.xml_guard import EntityGuard

runner = CliRunner()
RDF = 'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://ex.org/"'


def laughs(levels: int) -> str:
    """Return the nested-entity document that made gigabytes from a kilobyte."""
    entities = ['<!ENTITY l0 "lol">'] + [
        f'<!ENTITY l{n} "{f"&l{n - 1};" * 10}">' for n in range(1, levels + 1)]
    return (f'<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [\n{chr(10).join(entities)}\n]>\n'
            f'<rdf:RDF {RDF}><rdf:Description rdf:about="http://ex.org/s">'
            f"<ex:p>&l{levels};</ex:p></rdf:Description></rdf:RDF>\n")


OWL_STYLE = f"""<?xml version="1.0"?>
<!DOCTYPE rdf:RDF [
    <!ENTITY owl "http://www.w3.org/2002/07/owl#" >
    <!ENTITY ex "http://ex.org/" >
]>
<rdf:RDF {RDF}>
<rdf:Description rdf:about="&ex;s"><rdf:type rdf:resource="&owl;Class"/><ex:p>x &ex; y</ex:p>
</rdf:Description></rdf:RDF>
"""


def test_nested_entities_are_refused_in_a_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "laughs.rdf"
    path.write_text(laughs(6))  # 3,000,000 characters from 400 bytes (nine levels: 3 GB)
    with pytest.raises(TriplesError, match=r"laughs\.rdf: refused: a DTD entity that is "
                                           r"nested") as caught:
        list(RdfReader(path))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("declaration", [
    '<!ENTITY x SYSTEM "file:///etc/passwd">',       # external (XXE)
    '<!ENTITY % p "x">',                             # parameter entity
    f'<!ENTITY big "{"a" * 300}">',                  # long enough to multiply a file
])
def test_external_parameter_and_long_entities_are_refused(tmp_path: Path,
                                                          declaration: str) -> None:
    path = tmp_path / "kg.rdf"
    path.write_text(f'<!DOCTYPE rdf:RDF [ {declaration} ]>\n<rdf:RDF {RDF}/>\n')
    with pytest.raises(TriplesError, match=r"kg\.rdf: refused"):
        list(RdfReader(path))


def test_a_doctype_after_the_root_element_is_checked_too(tmp_path: Path) -> None:
    # The XML parser honours a DOCTYPE anywhere, so a scan of the prolog alone is not enough.
    path = tmp_path / "late.rdf"
    path.write_text(laughs(3).replace("<rdf:RDF " + RDF + ">", "", 1).replace(
        '<?xml version="1.0"?>\n', f"<rdf:RDF {RDF}>\n"))
    with pytest.raises(TriplesError, match=r"late\.rdf: refused"):
        list(RdfReader(path))


def test_plain_abbreviations_as_ontology_editors_write_them_are_read(tmp_path: Path) -> None:
    path = tmp_path / "onto.owl"
    path.write_text(OWL_STYLE)
    facts = list(RdfReader(path))
    assert [(f.subject, f.object) for f in facts] == [
        ("http://ex.org/s", "http://www.w3.org/2002/07/owl#Class"),
        ("http://ex.org/s", "x http://ex.org/ y")]


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 16])
def test_the_guard_hands_the_parser_every_byte_whatever_the_chunk(chunk: int) -> None:
    data = OWL_STYLE.encode() * 1
    expected = [str(q) for q in ox.parse(data, ox.RdfFormat.RDF_XML)]
    guard = EntityGuard(io.BytesIO(data), Path("x.rdf"), chunk=chunk)
    assert [str(q) for q in ox.parse(guard, ox.RdfFormat.RDF_XML)] == expected
    assert guard.expanded == len("http://ex.org/") * 2 + len("http://www.w3.org/2002/07/owl#")


def test_references_to_plain_entities_are_capped_in_total(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xml_guard, "MAX_EXPANSION_CHARS", 1000)
    path = tmp_path / "many.rdf"
    body = "&ex;" * 200  # 200 x 14 characters: 2,800 > 1,000
    path.write_text(OWL_STYLE.replace("x &ex; y", body))
    with pytest.raises(TriplesError, match=r"many\.rdf: refused: its DTD entities expand"):
        list(RdfReader(path))


def test_cli_run_refuses_the_file_in_one_line(tmp_path: Path, scripted) -> None:
    path = tmp_path / "laughs.rdf"
    path.write_text(laughs(6))
    result = runner.invoke(app, ["run", "--triples", str(path), "--model",
                                 scripted("laughs", ["T"]), "--out", str(tmp_path / "run"),
                                 "--no-progress"])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert f"{path}: refused: a DTD entity" in text and "Traceback" not in text
