"""The explorer in a real browser: headless Chromium, driven by selenium.

`kgcheck view` serves two runs (and, in its own test, one of 100,000 verdicts); a person
opens the runs page and its figures, filters and pages the fact table, opens one fact's
steps and compares the runs. Markup in a triple, an answer and evidence shows as text and
never runs. With ``KGCHECK_VIEW_SCREENSHOTS=DIR`` the pages are also saved as PNG there
(the documentation's screenshots).

Needs Debian's ``chromium`` and ``chromium-driver``; without them the test skips locally
and fails in CI (``CI=true``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.chromium import chromium, wait_for
from tests.support.served import stop_served
from tests.support.view_runs import (
    HOSTILE_ID,
    IMG,
    SCRIPT,
    confidence_of,
    fact_id,
    gold_of,
    label_of,
    make_view_run,
    start_view,
)

pytestmark = pytest.mark.slow

WAIT = 30
N = 120
BIG = 100_000
REVIEW = "http://127.0.0.1:8765/?token=review-token"
WRONG = [i for i in range(N) if label_of(i) in "TF" and label_of(i) != gold_of(i)]


def CLUSTER_OF(i: int) -> int:  # noqa: N802 - reads as the constant mapping it is
    return i % 3 - 1


@pytest.fixture(scope="module")
def browser() -> Iterator:
    yield from chromium("1400,1000")


@pytest.fixture(scope="module")
def viewing(tmp_path_factory) -> Iterator:
    root = tmp_path_factory.mktemp("view")
    a = make_view_run(root / "run-a", N)
    b = make_view_run(root / "run-b", N, shift=2, run_id="view0002")
    # An error analysis of run-a's wrong verdicts, as `kgcheck errors` writes it.
    errors = root / "errors"
    errors.mkdir()
    (errors / "errors.jsonl").write_text("".join(
        json.dumps({"run": "run-a", "run_path": str(a.resolve()), "fact_id": fact_id(i),
                    "explanation": f"explanation {i}", "cluster": CLUSTER_OF(i),
                    "cluster_label": ["noise", "places", "genres"][CLUSTER_OF(i) + 1]}) + "\n"
        for i in WRONG))
    served = start_view(str(a), str(b), "--errors", str(errors), "--review", REVIEW)
    try:
        yield served
    finally:
        assert stop_served(served) == 130


def _wait(driver, condition, message: str):
    return wait_for(driver, WAIT, condition, message)


def _ready(driver) -> int:
    return int(driver.execute_script("return document.body.dataset.ready || 0") or 0)


def _after(driver, action, view: str) -> None:
    """Do ``action`` and wait for the page to render ``view`` again."""
    before = _ready(driver)
    action()
    _wait(driver, lambda d: _ready(d) > before, f"the {view} page did not render")
    shown = driver.execute_script("return document.body.dataset.view")
    assert shown == view, driver.execute_script(
        "return document.getElementById('status').textContent")


def _go(driver, base_url: str, hash_: str, view: str) -> None:
    if not driver.current_url.startswith(base_url.split("#")[0]):
        # A new page: its render count starts again from nothing.
        driver.get(f"{base_url}#{hash_}")
        _wait(driver, lambda d: _ready(d) >= 1, f"the {view} page did not render")
        assert driver.execute_script("return document.body.dataset.view") == view
    else:
        _after(driver, lambda: driver.execute_script("location.hash = arguments[0]", hash_), view)


def _js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def _rows(driver, table: str = "facts") -> list[str]:
    return _js(driver, f"return [...document.querySelectorAll('#{table} tbody tr')]"
                       ".map(r => r.dataset.factId)")


def _text(driver, css: str) -> str | None:
    return _js(driver, "const e = document.querySelector(arguments[0]); "
                       "return e ? e.textContent : null", css)


def _shoot(driver, name: str) -> None:
    folder = os.environ.get("KGCHECK_VIEW_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))


def _click(driver, css: str) -> None:
    driver.find_element("css selector", css).click()


def test_runs_page_shows_scores_and_figures(browser, viewing) -> None:
    _go(browser, viewing.url, "runs", "runs")
    assert _js(browser, "return document.querySelectorAll('#runs tbody tr').length") == 2
    assert _text(browser, '#runs tr[data-run="0"] td:first-child') == "run-a"
    wrong = sum(label_of(i) in "TF" and label_of(i) != gold_of(i) for i in range(N))
    assert _text(browser, '#runs tr[data-run="0"] td:nth-child(9)') == str(wrong)
    figures = _js(browser, "return [...document.querySelectorAll('#figures figure')]"
                           ".map(f => f.dataset.figure)")
    assert {"f1:Mine", "time:Mine", "upset:Mine:DKA", "calibration:0"} <= set(figures)
    _js(browser, "document.querySelectorAll('#figures img').forEach(i => i.loading = 'eager')")
    _wait(browser, lambda d: d.execute_script(
        "return [...document.querySelectorAll('#figures img')]"
        ".every(i => i.complete && i.naturalWidth > 100)"), "the figures did not load")
    _shoot(browser, "explorer-runs")


def test_filters_and_pages_of_the_fact_table(browser, viewing) -> None:
    _go(browser, viewing.url, "facts?run=0", "facts")
    assert _rows(browser) == [fact_id(i) for i in range(50)]
    assert _text(browser, "#page-info") == f"page 1 of 3 · {N} facts"
    _after(browser, lambda: _click(browser, "#next"), "facts")
    assert _rows(browser) == [fact_id(i) for i in range(50, 100)]

    # Wrong and low confidence, by ticking the boxes and pressing Apply.
    _click(browser, 'input[name="f-wrong"]')
    _click(browser, 'input[name="f-low"]')
    _after(browser, lambda: _click(browser, "#apply"), "facts")
    expected = [fact_id(i) for i in range(N) if label_of(i) in "TF"
                and label_of(i) != gold_of(i)
                and max(confidence_of(i), 1 - confidence_of(i)) < 0.6]
    assert _rows(browser) == expected
    assert _js(browser, "return [...document.querySelectorAll('#facts tbody tr')]"
                        ".every(r => r.classList.contains('wrong'))")
    assert "null" not in _text(browser, "main")  # a part that does not apply is left out
    _shoot(browser, "explorer-facts")

    # A predicate, then the facts where the other run disagrees.
    from selenium.webdriver.support.ui import Select

    _go(browser, viewing.url, "facts?run=0", "facts")
    Select(browser.find_element("css selector", 'select[name="predicate"]')) \
        .select_by_value("team")
    _after(browser, lambda: _click(browser, "#apply"), "facts")
    assert _rows(browser) == [fact_id(i) for i in range(N) if i % 5 == 2][:50]
    _go(browser, viewing.url, "facts?run=0", "facts")
    Select(browser.find_element("css selector", 'select[name="other"]')).select_by_value("1")
    _after(browser, lambda: _click(browser, "#apply"), "facts")
    disagree = [i for i in range(N) if label_of(i) != label_of(i, 2)]
    assert len(disagree) > 50
    assert _rows(browser) == [fact_id(i) for i in disagree[:50]]
    shown = _js(browser, "return [...document.querySelectorAll('#facts tbody tr')]"
                         ".map(r => r.lastElementChild.textContent)")
    assert shown == [label_of(i, 2) for i in disagree[:50]]

    # An error cluster of the analysis loaded with --errors.
    _go(browser, viewing.url, "facts?run=0", "facts")
    Select(browser.find_element("css selector", 'select[name="cluster"]')).select_by_value("1")
    _after(browser, lambda: _click(browser, "#apply"), "facts")
    assert _rows(browser) == [fact_id(i) for i in WRONG if CLUSTER_OF(i) == 1]
    assert set(_js(browser, "return [...document.querySelectorAll('#facts tbody tr')]"
                            ".map(r => r.children[10].textContent)")) == {"1: genres"}

    _go(browser, viewing.url, "facts?run=0&filters=nei", "facts")
    assert all(label == "NA" for label in _js(
        browser, "return [...document.querySelectorAll('#facts tbody tr td:nth-child(5)')]"
                 ".map(c => c.textContent)"))


def test_the_fact_page_shows_each_step_and_markup_as_text(browser, viewing) -> None:
    _go(browser, viewing.url, f"fact?run=0&id={HOSTILE_ID}", "fact")
    steps = _js(browser, "return [...document.querySelectorAll('#timeline > li')]"
                         ".map(s => s.dataset.step)")
    # The conversation in order: the prompt, the unreadable answer, the re-prompt, the answer.
    assert steps[:2] == ["fact", "evidence"]
    assert steps[2:7] == ["system", "prompt", "answer", "re-prompt", "answer"]
    assert steps[-1] == "verdict"
    assert _text(browser, '#timeline li[data-step="fact"] dd') == f"Evil{SCRIPT}"
    marks = _js(browser, "return [...document.querySelectorAll('#timeline mark')]"
                         ".map(m => m.textContent)")
    assert marks == ["the cited part"]
    assert _js(browser, "return document.querySelector('.evidence[data-doc=d1]')"
                        ".classList.contains('cited')")
    assert not _js(browser, "return document.querySelector('.evidence[data-doc=d2]')"
                            ".classList.contains('cited')")
    assert IMG in _text(browser, ".evidence[data-doc=d1]")
    # Nothing the run holds became markup, nothing ran.
    assert _js(browser, "return window.__xss === undefined")
    assert _js(browser, "return document.querySelectorAll('main script, main img').length") == 0
    assert "kgcheck review" in _text(browser, "#review-command")
    assert _js(browser, "return document.getElementById('review-link').href") == REVIEW
    assert _js(browser, "return document.getElementById('studio-link').href") \
        .startswith("https://smith.langchain.com/studio/?baseUrl=")
    assert _text(browser, "#others").startswith("other runs: run-b")
    assert "null" not in _text(browser, "#timeline")
    _shoot(browser, "explorer-fact")

    # A verdict without a conversation: its raw answers, a re-prompt, a missing prompt said.
    _go(browser, viewing.url, f"fact?run=0&id={fact_id(11)}", "fact")
    steps = _js(browser, "return [...document.querySelectorAll('#timeline > li')]"
                         ".map(s => s.dataset.step)")
    assert steps == ["fact", "prompt", "raw answer", "re-prompt 1: raw answer", "verdict"]
    assert "not recorded" in _text(browser, '#timeline li[data-step="prompt"]')


def test_two_runs_side_by_side(browser, viewing) -> None:
    _go(browser, viewing.url, "diff?a=0&b=1", "diff")
    disagree = [fact_id(i) for i in range(N) if label_of(i) != label_of(i, 2)]
    assert _rows(browser, "diff") == disagree[:50]
    text = _text(browser, "#mcnemar")
    assert f"{len(disagree)} with different verdicts" in text and "McNemar" in text
    _shoot(browser, "explorer-diff")


def test_a_100000_verdict_run_pages(browser, tmp_path_factory) -> None:
    big = make_view_run(tmp_path_factory.mktemp("big") / "big", BIG)
    served = start_view(str(big))
    try:
        _go(browser, served.url, "facts?run=0", "facts")
        assert _text(browser, "#page-info") == f"page 1 of 2,000 · {BIG:,} facts"
        _after(browser, lambda: _click(browser, "#next"), "facts")
        assert _rows(browser)[0] == fact_id(50)
        _go(browser, served.url, "facts?run=0&page=1999", "facts")
        assert _rows(browser) == [fact_id(i) for i in range(BIG - 50, BIG)]
        _go(browser, served.url, "facts?run=0&filters=wrong&predicate=author&page=3", "facts")
        wrong = [fact_id(i) for i in range(BIG) if i % 5 == 3 and label_of(i) in "TF"
                 and label_of(i) != gold_of(i)]
        assert _rows(browser) == wrong[150:200]
    finally:
        assert stop_served(served) == 130
