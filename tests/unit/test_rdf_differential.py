"""Every RDF reading mode against pyoxigraph's parse, over generated N-Triples, N-Quads, Turtle.

Documents are generated from the grammars' productions (RDF 1.2 included: triple terms,
reifiers, annotations, ``VERSION``, base direction), written with hostile whitespace,
escapes, comments and line ends; some are broken on purpose. For each, pyoxigraph's parse
is the reference: where it refuses the file every mode must refuse it, else every mode
must give its facts (naming triples left out, a quad file's repeats once), their ids and
names, and a seeded sample must be the one drawn over the reference's facts. Blank nodes
of Turtle are compared up to their numbering by first appearance. Hypothesis runs
derandomized (a fixed seed), with modest example counts.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from pathlib import Path

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgcheck
from kgcheck.data.facts import Fact
from kgcheck.data.sampling import select_facts as select_stream
from kgcheck.data.triples import TriplesError, read_triples

EX = "http://e.org/"
NAMES = ("http://www.w3.org/2000/01/rdf-schema#label", "http://www.w3.org/2004/02/skos/core#prefLabel",
         "https://schema.org/name", "http://schema.org/name")
XSD = "http://www.w3.org/2001/XMLSchema#"
IRIS = (f"{EX}s", f"{EX}p", f"{EX}o", f"{EX}é", f"{EX}a#b", "urn:x:y", f"{EX}q/r", *NAMES)
BNODES = ("anon0", "b0", "b1", "0123456789abcdef0123", "x.y", "x-y", "_u", "1a")
TEXTS = ("A", "", "a \"quoted\" one", "back\\slash", "line\nbreak", "tab\there", "é ü 中",
         "\U0001f600", "cr\rhere", "#not a comment", "'single'")
LANGS = ("en", "en-US", "fr", "ar")
EXAMPLES = 25

DIFFERENTIAL = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- abstract terms -------------------------------------------------------------------------

def iris() -> st.SearchStrategy:
    return st.sampled_from(IRIS).map(lambda v: ("iri", v))


def bnodes() -> st.SearchStrategy:
    return st.sampled_from(BNODES).map(lambda v: ("bnode", v))


def literals() -> st.SearchStrategy:
    plain = st.tuples(st.just("lit"), st.sampled_from(TEXTS), st.none(), st.none(), st.none())
    tagged = st.tuples(st.just("lit"), st.sampled_from(TEXTS), st.sampled_from(LANGS),
                       st.sampled_from([None, "ltr", "rtl"]), st.none())
    typed = st.tuples(st.just("lit"), st.sampled_from(["1", "01", "x", "2.5"]), st.none(), st.none(),
                      st.sampled_from([f"{XSD}integer", f"{XSD}string", f"{EX}dt"]))
    return st.one_of(plain, tagged, typed)


def subjects() -> st.SearchStrategy:
    return st.one_of(iris(), bnodes())


def objects(depth: int = 2) -> st.SearchStrategy:
    base = st.one_of(iris(), bnodes(), literals())
    if depth == 0:
        return base
    triple = st.tuples(st.just("triple"), subjects(), iris(), objects(depth - 1))
    return st.one_of(base, base, triple)


def triples() -> st.SearchStrategy:
    return st.tuples(subjects(), iris(), objects())


# --- writing ----------------------------------------------------------------------------------

def uchar(char: str, long: bool) -> str:
    code = ord(char)
    return f"\\U{code:08X}" if code > 0xFFFF or long else f"\\u{code:04X}"


def escaped_at(draw, text: str) -> tuple[set[int], bool]:
    """Draw which characters of a text are written escaped (a few), and how."""
    if not text:
        return set(), False
    return draw(st.sets(st.integers(0, len(text) - 1), max_size=3)), draw(st.booleans())


def write_iri(value: str, draw) -> str:
    at, long = escaped_at(draw, value)
    return "<" + "".join(uchar(c, long) if n in at else c for n, c in enumerate(value)) + ">"


ECHARS = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\", "'": "\\'"}


def write_string(text: str, draw, quote: str = '"') -> str:
    at, long = escaped_at(draw, text)
    out = []
    for n, char in enumerate(text):
        if char in ("\n", "\r", "\\", quote) or n in at:
            out.append(ECHARS[char] if char in ECHARS and not long else uchar(char, long))
        else:
            out.append(char)
    return f"{quote}{''.join(out)}{quote}"


def write_literal(term, draw, turtle: bool) -> str:
    _kind, text, lang, direction, datatype = term
    quote = draw(st.sampled_from(['"', "'"])) if turtle else '"'
    if turtle and draw(st.integers(0, 4)) == 0 and not text.endswith(quote) and "\\" not in text:
        lexical = f"{quote * 3}{text.replace(chr(13), '')}{quote * 3}"  # a long string
    else:
        lexical = write_string(text, draw, quote)
    if lang:
        return f"{lexical}@{lang}" + (f"--{direction}" if direction else "")
    if datatype:
        if turtle and datatype == f"{XSD}integer" and draw(st.booleans()) and text.isdigit():
            return text  # a bare integer
        return f"{lexical}^^{write_term(('iri', datatype), draw, turtle)}"
    return lexical


def write_term(term, draw, turtle: bool = False) -> str:
    kind = term[0]
    if kind == "iri":
        value = term[1]
        if turtle and value.startswith(EX) and re.fullmatch(r"[a-zé]+", value[len(EX):]) \
                and draw(st.booleans()):
            return f"ex:{value[len(EX):]}"
        if turtle and value == "http://www.w3.org/1999/02/22-rdf-syntax-ns#type":
            return "a"
        return write_iri(value, draw)
    if kind == "bnode":
        return f"_:{term[1]}"
    if kind == "lit":
        return write_literal(term, draw, turtle)
    _kind, s, p, o = term
    gap = spaces(draw)
    return f"<<({gap}{write_term(s, draw, turtle)} {write_term(p, draw, turtle)} " \
           f"{write_term(o, draw, turtle)}{gap})>>"


def spaces(draw, none: bool = True) -> str:
    return draw(st.sampled_from(["", " ", "\t", "  \t "] if none else [" ", "\t", " \t  "]))


def line_end(draw) -> str:
    return draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))


def comment(draw) -> str:
    return draw(st.sampled_from(["", "", "# a comment", "#", "#<http://e.org/s> <x> .", "# é"]))


@st.composite
def line_document(draw, quads: bool) -> bytes:
    """An N-Triples or N-Quads document, one statement a line (some lines odd or broken)."""
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        # Mostly facts, so that most documents parse; a broken line or VERSION now and then.
        kind = draw(st.sampled_from(["triple"] * 24 + ["name", "repeat"] * 2
                                    + ["blank", "comment", "version", "broken"]))
        if kind in ("triple", "name", "repeat"):
            s, p, o = draw(triples())
            if kind == "name":
                p, o = ("iri", draw(st.sampled_from(NAMES))), draw(literals())
            graph = ""
            if quads and draw(st.booleans()):
                graph = " " + write_term(draw(st.one_of(iris(), bnodes())), draw)
            statement = (f"{spaces(draw)}{write_term(s, draw)}{spaces(draw)}{write_term(p, draw)}"
                         f"{spaces(draw)}{write_term(o, draw)}{graph}{spaces(draw)}.")
            lines.append(statement + spaces(draw) + comment(draw))
            if kind == "repeat":
                # The same triple written again, differently (and in another graph).
                graph = " " + write_term(("iri", f"{EX}g"), draw) if quads else ""
                lines.append(f"{write_term(s, draw)} {write_term(p, draw)} {write_term(o, draw)}"
                             f"{graph} .")
        elif kind == "blank":
            lines.append(spaces(draw))
        elif kind == "comment":
            lines.append(spaces(draw) + "# " + draw(st.sampled_from(["note", "<a> <b> <c> .", ""])))
        elif kind == "version":
            lines.append('VERSION "1.2"')
        else:
            lines.append(draw(st.sampled_from([
                f"<{EX}s> <{EX}p> oops .", f"<{EX}s> <{EX}p> <{EX}o>", f'<{EX}s> <{EX}p> "open .',
                f"<s> <{EX}p> <{EX}o> .", f"<{EX}s> <{EX}p> <{EX}o> . <{EX}s> <{EX}p> <{EX}o> ."])))
    out = "".join(line + line_end(draw) for line in lines)
    if out and draw(st.booleans()):
        out = out.rstrip("\r\n")  # no line end after the last line
    return out.encode("utf-8")


@st.composite
def turtle_document(draw) -> bytes:
    """A Turtle document using every production (some broken)."""
    parts = []
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(["@prefix ex: <http://e.org/> .", "PREFIX ex: <http://e.org/>",
                                           "prefix ex: <http://e.org/>"])))
        prefixed = True
    else:
        prefixed = False
    if draw(st.integers(0, 3)) == 0:
        parts.append(draw(st.sampled_from(['VERSION "1.2"', "@version '1.2' .", 'VERSION """1.2"""'])))

    def term(t):
        text = write_term(t, draw, turtle=True)
        return text if prefixed or not text.startswith("ex:") else write_iri(t[1], draw)

    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["simple", "lists", "anon", "property_list", "collection",
                                     "reifier", "annotation", "reified_subject", "name", "base",
                                     "relative", "comment", "broken"]))
        s, p, o = draw(triples())
        s, p, o = term(s), term(p), term(o)
        o2 = term(draw(objects(0)))
        p2 = term(draw(iris()))
        gap = spaces(draw, none=False)
        if kind == "simple":
            parts.append(f"{s}{gap}{p}{gap}{o}{spaces(draw)}.")
        elif kind == "lists":
            parts.append(f"{s} {p} {o} ,{gap}{o2} ;{line_end(draw)}\t{p2} {o} ; .")
        elif kind == "anon":
            parts.append(f"[] {p} {o} .")
        elif kind == "property_list":
            parts.append(f"[ {p} {o} ;{gap}{p2} [ {p} {o2} ] ] {p2} {o2} .")
        elif kind == "collection":
            parts.append(f"{s} {p} ( {o} {o2} () ) .")
        elif kind == "reifier":
            reifier = draw(st.sampled_from(["", " ~ _:r", " ~ ex:r" if prefixed else " ~ <http://e.org/r>", " ~"]))
            parts.append(f"<< {s} {p} {o}{reifier} >> {p2} {o2} .")
        elif kind == "annotation":
            parts.append(f"{s} {p} {o} ~ _:r {{| {p2} {o2} |}} {{|{p2} {o} |}} .")
        elif kind == "reified_subject":
            parts.append(f"{s} {p2} << {s} {p} {o} >> .")
        elif kind == "name":
            name = write_iri(draw(st.sampled_from(NAMES)), draw)
            parts.append(f"{s} {name} {write_literal(draw(literals()), draw, True)} .")
        elif kind == "base":
            parts.append(draw(st.sampled_from(["@base <http://e.org/b/> .", "BASE <http://e.org/c/>"])))
        elif kind == "relative":
            parts.append(f"<rel> {p} <#frag> .")
        elif kind == "comment":
            parts.append("# " + draw(st.sampled_from(["note", "ex:a ex:b ex:c ."])))
        else:
            parts.append(draw(st.sampled_from([f"{s} {p} .", f"{s} {p} {o}", "[ ] .", "<< >> ."])))
        if draw(st.booleans()):
            parts[-1] += spaces(draw) + comment(draw)
    return "".join(part + line_end(draw) for part in parts).encode("utf-8")


# --- the reference ----------------------------------------------------------------------------

def term_text(term) -> str:
    return f"<<( {term} )>>" if isinstance(term, ox.Triple) else str(term)


def plain(term) -> str:
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    if isinstance(term, ox.Triple):
        return term_text(term)
    return str(term.value)


def reference(path: Path, fmt: ox.RdfFormat) -> tuple[list[tuple], dict[str, str]] | None:
    """Return the facts of pyoxigraph's parse (as rows) and the names, or None if refused."""
    base = None if fmt in (ox.RdfFormat.N_TRIPLES, ox.RdfFormat.N_QUADS) else path.resolve().as_uri()
    try:
        quads = list(ox.parse(path=str(path), format=fmt, base_iri=base))
    except SyntaxError:
        return None
    labels: dict[str, str] = {}

    def numbered(text: str) -> str:
        # Turtle's blank nodes, numbered by first appearance (subject, then object, inside out).
        if fmt in (ox.RdfFormat.N_TRIPLES, ox.RdfFormat.N_QUADS):
            return text
        return re.sub(r"_:([^\s)]+)", lambda m: labels.setdefault(m[1], f"_:n{len(labels)}"), text)

    rows, seen, names = [], set(), {}
    name_rank = {iri: n for n, iri in enumerate(NAMES)}
    for quad in quads:
        s, p, o = (numbered(term_text(t)) for t in (quad.subject, quad.predicate, quad.object))
        if quad.predicate.value in name_rank:
            if isinstance(quad.object, ox.Literal) and quad.object.value.strip():
                lang = quad.object.language
                rank = (name_rank[quad.predicate.value], 0 if not lang or lang.lower().startswith("en") else 1)
                if s not in names or rank < names[s][0]:
                    names[s] = (rank, quad.object.value)
            continue
        if fmt == ox.RdfFormat.N_QUADS:
            if (s, p, o) in seen:
                continue
            seen.add((s, p, o))
        values = tuple(numbered(plain(t)) for t in (quad.subject, quad.predicate, quad.object))
        rows.append(((s, p, o), values))
    return rows, {term: name for term, (_rank, name) in names.items()}


def numbered_rows(facts: list[Fact], line_format: bool) -> list[tuple]:
    """A mode's facts as comparable rows: terms (blank nodes numbered), values, names."""
    labels: dict[str, str] = {}

    def numbered(text: str) -> str:
        if line_format:
            return text
        return re.sub(r"_:([^\s)]+)", lambda m: labels.setdefault(m[1], f"_:n{len(labels)}"), text)

    return [numbered(f"{f.rdf['subject']} {f.rdf['predicate']} {f.rdf['object']}") for f in facts]


def check(tmp_path: Path, document: bytes, suffix: str, fmt: ox.RdfFormat) -> None:
    path = tmp_path / f"kg{suffix}"
    path.write_bytes(document)
    expected = reference(path, fmt)
    read = [read_triples, kgcheck.select_facts,
            lambda p: kgcheck.select_facts(p, sample=10_000, seed=1),
            lambda p: kgcheck.select_facts(p, sample=10_000, seed=1, stratify="predicate")]
    if expected is None or not expected[0]:
        for mode in read:
            with pytest.raises(TriplesError, match=re.escape(str(path))):
                mode(path)
        return
    rows, names = expected
    line_format = fmt in (ox.RdfFormat.N_TRIPLES, ox.RdfFormat.N_QUADS)
    # The reference's stream: every fact in file order (a triples file's repeats included).
    stream = [Fact(id=hashlib.blake2b(f"{s} {p} {o} .".encode(), digest_size=8).hexdigest(),
                   subject=v[0], predicate=v[1], object=v[2],
                   rdf=dict(zip(("subject", "predicate", "object"), (s, p, o), strict=True)))
              for (s, p, o), v in rows]
    distinct = list({f.id: f for f in stream}.values())
    want = sorted(numbered_rows(distinct, line_format))
    first_ids = None
    for mode in read:
        facts = mode(path)
        assert len(facts) == len(distinct)
        # In file order, as the reference's: blank nodes number alike.
        assert sorted(numbered_rows(facts, line_format)) == want
        if line_format:  # labels as written: the ids are the reference's
            assert sorted(f.id for f in facts) == sorted(f.id for f in distinct)
            for fact in facts:
                found = {k: names[fact.rdf[k]] for k in ("subject", "predicate", "object")
                         if fact.rdf[k] in names}
                assert (fact.names or {}) == found
        ids = sorted(f.id for f in facts)
        assert first_ids is None or ids == first_ids  # the same ids in every mode
        first_ids = ids
    if line_format:
        for seed in (0, 5):
            size = max(1, len(stream) // 2)
            drawn = kgcheck.select_facts(path, sample=size, seed=seed)
            assert [f.id for f in drawn] == [f.id for f in select_stream(stream, sample=size, seed=seed).facts]
            strata = kgcheck.select_facts(path, sample=size, seed=seed, stratify="predicate")
            assert [f.id for f in strata] == [
                f.id for f in select_stream(stream, sample=size, seed=seed, stratify="predicate").facts]


@DIFFERENTIAL
@given(line_document(quads=False))
def test_n_triples_modes_match_pyoxigraph(document: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check(Path(tmp), document, ".nt", ox.RdfFormat.N_TRIPLES)


@DIFFERENTIAL
@given(line_document(quads=True))
def test_n_quads_modes_match_pyoxigraph(document: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check(Path(tmp), document, ".nq", ox.RdfFormat.N_QUADS)


@DIFFERENTIAL
@given(turtle_document())
def test_turtle_modes_match_pyoxigraph(document: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check(Path(tmp), document, ".ttl", ox.RdfFormat.TURTLE)


def test_the_generators_make_mostly_valid_documents_of_every_kind() -> None:
    """The comparison is worth something only if most generated files parse."""
    valid = {}
    for name, strategy, fmt in (("nt", line_document(quads=False), ox.RdfFormat.N_TRIPLES),
                                ("nq", line_document(quads=True), ox.RdfFormat.N_QUADS),
                                ("ttl", turtle_document(), ox.RdfFormat.TURTLE)):
        documents: list[bytes] = []

        def keep(document: bytes, documents: list[bytes] = documents) -> None:
            documents.append(document)

        settings(max_examples=25, derandomize=True, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
                 )(given(strategy)(lambda document: keep(document)))()
        parsed = 0
        for document in documents:
            try:
                parsed += bool(list(ox.parse(document, fmt, base_iri="http://e.org/doc")))
            except SyntaxError:
                pass
        valid[name] = parsed / len(documents)
    assert all(share >= 0.3 for share in valid.values()), json.dumps(valid)
