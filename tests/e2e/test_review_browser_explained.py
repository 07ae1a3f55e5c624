"""The review page shows what a verdict says beside its label, and takes correction decisions.

Headless Chromium (see test_review_browser.py): the confidence, reason, cited passages and
conversation of a verdict show as text; a suggested correction is accepted as it is or
with an edited value, and labels.csv keeps the decision and the value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_review_browser import _click, _current, _open, _saved, _text, browser
from tests.support.review_runs import SCRIPT, label_rows, make_run, start_review
from tests.support.served import stop_served

pytestmark = pytest.mark.slow
__all__ = ["browser"]  # the fixture, shared with the other browser test

EXPLAINED = {
    "2": {"confidence": 0.12, "confidence_source": "logprobs",
          "rationale": f"Paris is the capital of France {SCRIPT}.",
          "correction": {"part": "object", "value": "France", "current": "Germany"},
          "conversation": [{"role": "system", "content": "Is the following fact true?"},
                           {"role": "user", "content": 'Fact: "Paris" | "is capital of" | '
                            '"Germany"'},
                           {"role": "assistant", "content": "F\nReason: Paris is in France."}],
          "citations": [{"passage": "P1", "doc_id": "w1", "chunk_id": "w1#0",
                         "url": "https://example.org/paris", "text": "Paris, France."}]},
    "6": {"confidence": 0.3, "confidence_source": "self-consistency",
          "correction": {"part": "object", "value": "Italy", "current": "Spain"}},
}


def _explain(run_dir: Path) -> None:
    path = run_dir / "verdicts.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, **EXPLAINED.get(r["fact_id"], {})}) + "\n"
                            for r in records))


def test_corrections_are_accepted_or_edited_on_the_page(browser, tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    _explain(run_dir)
    server = start_review(run_dir, "--order", "uncertainty")
    try:
        _open(browser, server.url)
        # The least certain first: fact 6 (0.3 -> certainty 0.7), then 2 (0.88), then the
        # verdicts without a confidence.
        order = [li.get_attribute("data-fact-id")
                 for li in browser.find_elements("css selector", "#queue li")]
        assert order[:2] == ["6", "2"]
        assert _current(browser) == "6"
        assert "Italy" in _text(browser, "#suggestion")
        _click(browser, "#correction-accept")
        _click(browser, "#btn-F")
        _saved(browser, "6", "F")

        assert _current(browser) == "2"
        assert "0.120" in _text(browser, "#confidence")
        assert SCRIPT in _text(browser, "#rationale")  # text, never markup
        assert browser.execute_script("return window.__xss === undefined")
        assert "https://example.org/paris" in _text(browser, "#citations")
        assert "Conversation (3 messages)" in _text(browser, "#conversation")
        box = browser.find_element("id", "correction-value")
        box.clear()
        box.send_keys("France (country)")
        _click(browser, "#btn-F")
        _saved(browser, "2", "F")
    finally:
        stop_served(server)
    rows = {r["fact_id"]: r for r in label_rows(run_dir)}
    assert (rows["6"]["correction"], rows["6"]["corrected_value"]) == ("accept", "Italy")
    assert (rows["2"]["correction"], rows["2"]["corrected_value"]) == ("edit",
                                                                        "France (country)")
