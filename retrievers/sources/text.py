"""Turn fetched bytes into plain evidence text: markup, scripts and control characters out.

Pages are data for the model, never instructions. Whatever a source returns passes through
``clean_text`` before it becomes a document: tags (and so any fence a page might try to
close in the prompt), script and style bodies, control and zero-width characters are
removed, and whitespace is normalised. HTML goes through trafilatura first, which keeps the
main text and drops navigation, scripts and boilerplate.
"""

from __future__ import annotations

import html
import re
import unicodedata

from charset_normalizer import from_bytes

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain",)

_SCRIPT = re.compile(r"<(script|style|noscript|template)\b[^>]*>.*?</\1\s*>",
                     re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_TAG = re.compile(r"</?[A-Za-z!/?][^<>]*>")
_INVISIBLE = {"Cc", "Cf", "Co", "Cs"}


class ExtractError(ValueError):
    """A body that holds no usable text: an unsupported type or an empty page."""


def clean_text(text: str) -> str:
    """Strip markup and invisible characters from text; keep lines and words."""
    text = _SCRIPT.sub(" ", text)
    text = _COMMENT.sub(" ", text)
    text = _TAG.sub(" ", text)
    text = html.unescape(text)
    # Control, format (zero-width, bidi overrides) and private-use characters hide text.
    text = "".join(c if c in "\n\t" or unicodedata.category(c) not in _INVISIBLE else " "
                   for c in unicodedata.normalize("NFKC", text))
    # Any angle-bracket fence marker that survived the tag pass is neutralised.
    text = text.replace("<", "‹").replace(">", "›")
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line).strip()


def decode(body: bytes, charset: str | None) -> str:
    """Decode a body by its declared charset, else by detection (UTF-8 when unsure)."""
    if charset:
        try:
            return body.decode(charset)
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        best = from_bytes(body).best()
        return str(best) if best is not None else body.decode("utf-8", errors="replace")


def page_text(body: bytes, content_type: str, charset: str | None) -> tuple[str, str]:
    """Return (title, text) of an HTML or plain-text page; ExtractError for other types."""
    if content_type in TEXT_TYPES:
        return "", clean_text(decode(body, charset))
    if content_type and content_type not in HTML_TYPES:
        raise ExtractError(f"not HTML or plain text ({content_type})")
    import trafilatura  # noqa: PLC0415 - optional extra, imported by the web source only

    markup = decode(body, charset) if charset else body
    extracted = trafilatura.bare_extraction(markup, include_comments=False,
                                            include_tables=True, with_metadata=True)
    if extracted is None:
        raise ExtractError("no main text found in the page")
    title = clean_text(str(getattr(extracted, "title", "") or ""))
    text = clean_text(str(getattr(extracted, "text", "") or ""))
    if not text:
        raise ExtractError("no main text found in the page")
    return title, text
