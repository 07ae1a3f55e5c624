"""The review page in a real browser: headless Chromium, driven by selenium.

A person labels facts with the keyboard and the mouse, reloads, filters and undoes; the
labels file and the review graph's checkpoints then hold exactly what was clicked. Markup in
a triple and in evidence shows as text and never runs. When the server goes away, the page
says the decision was not saved.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them). Without
them the test skips locally and fails in CI (``CI=true``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.chromium import chromium, wait_for
from tests.support.review_runs import (
    IMG,
    SCRIPT,
    checkpoint_reviews,
    label_rows,
    make_run,
    start_review,
)
from tests.support.served import stop_served

pytestmark = pytest.mark.slow

WAIT = 20


@pytest.fixture
def browser() -> Iterator:
    yield from chromium("1280,900")


def _wait(driver, condition, message: str):
    return wait_for(driver, WAIT, condition, message)


def _open(driver, url: str) -> None:
    driver.get(url)
    _wait(driver, lambda d: d.execute_script("return document.body.dataset.ready"),
          "the page did not load its queue")


def _press(driver, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(key).perform()


def _text(driver, css: str) -> str | None:
    # Read in one script: the page re-renders, so an element found earlier may be gone.
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null", css)


def _state_of(driver, fact_id: str) -> str | None:
    return _text(driver, f'#queue li[data-fact-id="{fact_id}"] .state')


def _saved(driver, fact_id: str, label: str) -> None:
    _wait(driver, lambda d: _state_of(d, fact_id) == f"{label} saved",
          f"fact {fact_id} was not shown as saved with {label}")


def _current(driver) -> str:
    return driver.execute_script(
        "const e = document.querySelector('#queue li.current'); return e && e.dataset.factId")


def _click(driver, css: str) -> None:
    driver.find_element("css selector", css).click()


def test_a_person_reviews_with_keyboard_and_mouse(browser, tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    server = start_review(run_dir, "--reviewer", "ana")
    try:
        _open(browser, server.url)
        assert _current(browser) == "1"
        assert _text(browser, "#progress-text").startswith("0 of 6 decided")

        _press(browser, "t")  # fact 1: true, by keyboard
        _saved(browser, "1", "T")
        assert _current(browser) == "2"  # on to the next undecided fact
        _press(browser, "f")  # fact 2: false
        _saved(browser, "2", "F")

        # Fact 3 holds markup in its triple, its answer and its evidence: text, not HTML.
        assert _current(browser) == "3"
        readable = _text(browser, "#readable")
        assert "<script>" in readable and "onerror=" in readable
        assert IMG in _text(browser, "#evidence") and SCRIPT in _text(browser, "#evidence")
        assert browser.execute_script(
            "return document.querySelectorAll('#card img, #card script, #queue img').length") == 0
        assert browser.execute_script("return window.__xss === undefined")
        _click(browser, "#btn-skip")  # by mouse
        _saved(browser, "3", "skip")

        # Fact 6 picked from the queue with the mouse, with a note.
        _click(browser, '#queue li[data-fact-id="6"]')
        assert _current(browser) == "6"
        browser.find_element("id", "note").send_keys("Rome is the capital of Italy")
        _click(browser, "#btn-F")
        _saved(browser, "6", "F")

        # A filter shows only what the model left undecided.
        from selenium.webdriver.support.ui import Select

        Select(browser.find_element("id", "filter")).select_by_value("model-NA")
        shown = [li.get_attribute("data-fact-id") for li in
                 browser.find_elements("css selector", "#queue li") if li.is_displayed()]
        assert shown == ["3", "5"]
        Select(browser.find_element("id", "filter")).select_by_value("all")

        # Reload: the decisions come back from the server, saved, and the queue goes on.
        browser.refresh()
        _wait(browser, lambda d: d.execute_script("return document.body.dataset.ready"),
              "the page did not load again")
        for fact_id, label in [("1", "T"), ("2", "F"), ("3", "skip"), ("6", "F")]:
            _saved(browser, fact_id, label)
        assert _text(browser, "#progress-text").startswith("4 of 6 decided")
        assert _current(browser) == "4"

        _press(browser, "u")  # undo the last decision (fact 6's), after the reload
        _wait(browser, lambda d: _state_of(d, "6") == "" and _current(d) == "6",
              "undo did not take back fact 6")
        assert _text(browser, "#progress-text").startswith("3 of 6 decided")
        _click(browser, '#queue li[data-fact-id="4"]')
        _press(browser, "f")
        _saved(browser, "4", "F")
        browser.save_screenshot(str(tmp_path / "review.png"))
        shot = os.environ.get("KGCHECK_REVIEW_SCREENSHOT")
        if shot:
            shutil.copy(tmp_path / "review.png", shot)
    finally:
        code = stop_served(server)
    assert code == 130

    rows = label_rows(run_dir)
    assert [(r["fact_id"], r["label"], r["note"], r["reviewer"]) for r in rows] == [
        ("1", "T", "", "ana"), ("2", "F", "", "ana"), ("3", "skip", "", "ana"),
        ("4", "F", "", "ana")]
    # Fact 6's decision was undone (its thread deleted); fact 5 was never decided.
    assert checkpoint_reviews(run_dir) == {"1": "T", "2": "F", "3": "skip", "4": "F"}

    # The server is gone: a decision made now is shown as not saved, never as saved.
    _click(browser, '#queue li[data-fact-id="5"]')
    _press(browser, "t")
    _wait(browser, lambda d: _state_of(d, "5") == "not saved",
          "a failed decision was not shown as not saved")
    assert "not saved" in _text(browser, "#banner").lower()
    _click(browser, '#queue li[data-fact-id="5"]')
    assert "not saved" in _text(browser, "#status").lower()
    assert browser.find_element("id", "retry").is_displayed()
    assert [r["fact_id"] for r in label_rows(run_dir)] == ["1", "2", "3", "4"]


def test_fifty_facts_by_keyboard_across_a_restart(browser, tmp_path: Path) -> None:
    """A curator reviews 50 facts, stops the server half way, and finishes after a restart."""
    import json

    import kgcheck

    run_dir = tmp_path / "yago-dka"
    kgcheck.run(dataset="yago", strategy="dka", model="replay:gemma2:9b", limit=50,
                out=run_dir)
    order = [json.loads(line)["fact_id"] for line in
             (run_dir / "verdicts.jsonl").read_text().splitlines()]
    keys = {fid: "tfs"[n % 3] for n, fid in enumerate(order)}
    expected = {fid: {"t": "T", "f": "F", "s": "skip"}[k] for fid, k in keys.items()}

    server = start_review(run_dir)
    try:
        _open(browser, server.url)
        for fact_id in order[:30]:
            assert _current(browser) == fact_id
            _press(browser, keys[fact_id])
            _saved(browser, fact_id, expected[fact_id])
    finally:
        stop_served(server)
    # The old page's server is gone; a new one on the same port has a new token.
    port = server.base.rsplit(":", 1)[1]
    server = start_review(run_dir, "--port", port)
    try:
        _press(browser, keys[order[30]])  # from the stale page: refused, and it says why
        _wait(browser, lambda d: "open the address it printed" in (_text(d, "#banner") or ""),
              "the stale page did not say to open the new address")
        _open(browser, server.url)
        assert _text(browser, "#progress-text").startswith("30 of 50 decided")
        for fact_id in order[30:]:
            assert _current(browser) == fact_id
            _press(browser, keys[fact_id])
            _saved(browser, fact_id, expected[fact_id])
        assert _text(browser, "#progress-text").startswith("50 of 50 decided")
    finally:
        stop_served(server)
    assert {r["fact_id"]: r["label"] for r in label_rows(run_dir)} == expected
    assert [r["fact_id"] for r in label_rows(run_dir)] == order
