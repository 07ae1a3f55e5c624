r"""Free text on its way into RDF syntax: checked by the parser that writes it, or escaped.

Fact ids, model answers, reviewers' notes and corrected values are untrusted text. Whatever
kgcheck writes as RDF syntax (a SPARQL Update, an RDF Patch, N-Triples, Turtle) takes such
text only through here:

- an IRI is one exactly when pyoxigraph, which writes it, accepts it (``is_iri``,
  ``iri_problem``): a value that merely looks like one (``http://[evil``) is refused, never
  written as a name;
- a record's own N-Triples terms are parsed as one triple and nothing else
  (``triple_from_terms``): text that would close the line, add a triple or start a
  comment is refused;
- a comment holds any text on one line (``comment_text``): line breaks, other control
  characters and invisible format characters are written as ``\uXXXX`` escapes, so no
  text can end a comment and start a statement.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Mapping
from typing import Any

import pyoxigraph as ox

__all__ = ["IRI_SCHEMES", "TermError", "comment_text", "iri_problem", "is_iri",
           "literal_from_term", "looks_like_iri", "triple_from_terms"]

# Schemes of the terms used as IRIs as they are (with ``://``), besides ``urn:``.
IRI_SCHEMES = ("http", "https", "ftp", "file")
_IRI_LIKE = re.compile(r"^(?:https?|ftp|file|urn):", re.IGNORECASE)
# Characters a comment shows escaped: control (Cc), format (Cf: bidi overrides, zero-width),
# line and paragraph separators, and lone surrogates (no UTF-8 for them).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
# The graph of the one quad a record's terms must parse to: random per process, so text
# cannot name it and close the line early (``... <g> . # rest``).
_SENTINEL_GRAPH = f"urn:uuid:{uuid.uuid4()}"


class TermError(ValueError):
    """Text that cannot be made into the RDF term it should be; the message says why."""


def looks_like_iri(text: str) -> bool:
    """Tell whether text starts as an IRI would: ``http:``, ``https:``, ``ftp:``, ``urn:`` ..."""
    return bool(_IRI_LIKE.match(text))


def iri_problem(text: str) -> str | None:
    """Say why pyoxigraph, which writes every exported IRI, refuses ``text`` (None: it does not)."""
    try:
        ox.NamedNode(text)
    except ValueError as exc:
        return f"not a valid IRI ({comment_text(str(exc))})"
    return None


def is_iri(term: str) -> bool:
    """Tell whether a term is an absolute IRI: ``http(s)://``, ``ftp://``, ``file://``, ``urn:``.

    Other ``word:rest`` strings (``foaf:name``, ``Paris:France``) are names, not IRIs; so is
    text that has an IRI's shape but that pyoxigraph refuses (``http://[evil``).
    """
    scheme, sep, rest = term.partition(":")
    if not sep or not rest:
        return False
    scheme = scheme.lower()
    if scheme != "urn" and not (scheme in IRI_SCHEMES and rest.startswith("//")
                                and len(rest) > 2):
        return False
    return iri_problem(term) is None


def comment_text(text: str) -> str:
    r"""Return ``text`` on one line, safe inside a ``#`` comment of any RDF or SPARQL syntax.

    Backslashes, line breaks, control and invisible format characters are escaped
    (``\n``, ``\u2028``, ``\u202e``); everything else stays as it is, readable.
    """
    out = []
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif unicodedata.category(char) in _ESCAPED_CATEGORIES:
            code = ord(char)
            out.append(f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}")
        else:
            out.append(char)
    return "".join(out)


def triple_from_terms(terms: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """Parse a record's ``{"subject", "predicate", "object"}`` N-Triples terms as one triple.

    The terms are parsed together, followed by a graph no text can name: exactly one quad
    in that graph must come out, so a term that ends the line, adds a triple or comments
    the rest out is refused.

    Raises:
        TermError: a term is missing, not text, or the terms are not one triple.

    """
    parts = []
    for key in ("subject", "predicate", "object"):
        value = terms.get(key)
        if not isinstance(value, str) or not value.strip():
            raise TermError(f"its rdf {key} is missing")
        parts.append(value)
    line = f"{parts[0]} {parts[1]} {parts[2]} <{_SENTINEL_GRAPH}> .\n"
    try:
        quads = list(ox.parse(line, format=ox.RdfFormat.N_QUADS))
    except SyntaxError as exc:
        raise TermError(f"its rdf terms are not N-Triples ({comment_text(str(exc))})") from None
    if len(quads) != 1 or not isinstance(quads[0].graph_name, ox.NamedNode) \
            or quads[0].graph_name.value != _SENTINEL_GRAPH:
        raise TermError("its rdf terms are not one triple")
    quad = quads[0]
    return quad.subject, quad.predicate, quad.object


def literal_from_term(text: str) -> ox.Literal:
    """Parse one N-Triples literal (``"Köln"@de``, ``"1"^^<...#integer>``), and nothing else.

    Raises:
        TermError: the text is not exactly one literal.

    """
    _, _, obj = triple_from_terms({"subject": "<urn:kgcheck:s>", "predicate": "<urn:kgcheck:p>",
                                   "object": text})
    if not isinstance(obj, ox.Literal):
        raise TermError("not an RDF literal")
    return obj
