"""Several annotators, adjudication and labelling until precise, in the review session."""

from __future__ import annotations

import csv
import re
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from ppi_py import ppi_mean_ci
from scipy.stats import beta, norm, t
from statsmodels.stats.proportion import proportion_confint

from kgcheck.data.runfolder import read_verdicts
from kgcheck.evals.accuracy.estimators import Labeled
from kgcheck.evals.stats.precision import beta_hdi, running_estimate
from kgcheck.review.session import ReviewError, ReviewSession, assigned
from tests.e2e.test_review_browser import (
    _current,
    _open,
    _press,
    _text,
    _wait,
    browser,  # noqa: F401 - the Chromium fixture
)
from tests.support.review_runs import start_review
from tests.support.served import stop_served
from tests.support.stats_runs import make_replay_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_replay_run(tmp_path_factory.mktemp("rstats") / "run", "gemma2:9b", limit=200)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_assignment_shares_the_overlap_with_everyone() -> None:
    facts = [str(i) for i in range(100)]
    shares = assigned(facts, ["ann", "bo", "cy"], 0.2, seed=3)
    everyone = set(shares["ann"]) & set(shares["bo"]) & set(shares["cy"])
    assert len(everyone) == 20
    rest = [set(v) - everyone for v in shares.values()]
    assert sorted(len(r) for r in rest) == [26, 27, 27]
    assert not (rest[0] & rest[1]) and set().union(*shares.values()) == set(facts)
    assert assigned(facts, ["ann", "bo", "cy"], 0.2, seed=3) == shares
    with pytest.raises(ReviewError, match="two or more names"):
        assigned(facts, ["ann"], 0.2)


async def test_annotators_review_into_their_own_files_then_adjudicate(run_dir: Path) -> None:
    team = ["ann", "bo"]
    decided: dict[str, dict[str, str]] = {}
    for who, flip in (("ann", set()), ("bo", {0, 1, 2})):
        async with ReviewSession.open(run_dir, annotator=who, team=team, overlap=0.1,
                                      sample=40) as session:
            decided[who] = {}
            for n, item in enumerate(session.items):
                label = item.question["model"]["label"]
                label = label if label in ("T", "F") else "T"
                if n in flip and item.fact_id in decided["ann"]:
                    label = {"T": "F", "F": "T"}[label]
                await session.decide(item.fact_id, label)
                decided[who][item.fact_id] = label
    shared = set(decided["ann"]) & set(decided["bo"])
    assert len(shared) == 4  # 10% of the 40-fact sample
    ann = _rows(run_dir / "labels-ann.csv")
    assert {r["annotator"] for r in ann} == {"ann"} and len(ann) == len(decided["ann"])
    assert not (run_dir / "labels.csv").exists()
    split = {f for f in shared if decided["ann"][f] != decided["bo"][f]}
    assert split
    async with ReviewSession.open(run_dir, adjudicate=True) as session:
        assert {i.fact_id for i in session.items} == split
        item = session.items[0]
        assert item.annotations == {"ann": decided["ann"][item.fact_id],
                                    "bo": decided["bo"][item.fact_id]}
        await session.decide(item.fact_id, "T")
    assert [r["fact_id"] for r in _rows(run_dir / "labels.csv")] == [item.fact_id]


@pytest.fixture(scope="module")
def lone_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_replay_run(tmp_path_factory.mktemp("lone") / "run", "gemma2:9b", limit=20)


async def test_bad_review_options_get_clear_errors(run_dir: Path, lone_run: Path) -> None:
    with pytest.raises(ReviewError, match="annotator='zed' is not in team"):
        async with ReviewSession.open(run_dir, annotator="zed", team=["ann", "bo"]):
            pass
    with pytest.raises(ReviewError, match="until_moe=1.5 must be between 0 and 1"):
        async with ReviewSession.open(run_dir, until_moe=1.5):
            pass
    with pytest.raises(ReviewError, match="needs the labels of two or more annotators"):
        async with ReviewSession.open(lone_run, adjudicate=True):
            pass


def test_running_estimate_against_statsmodels_scipy_and_ppi(run_dir: Path) -> None:
    records = read_verdicts(run_dir / "verdicts.jsonl")
    verdicts = {f: r["label"] for f, r in records.items()}
    rng = np.random.default_rng(0)
    sample = list(rng.choice(sorted(records), size=60, replace=False))
    labels = [Labeled(f, records[f]["gold"] == "T") for f in sample]
    found = running_estimate(verdicts, labels, target=0.1)
    true = sum(x.true for x in labels)
    low, high = proportion_confint(true, 60, alpha=0.05, method="wilson")
    assert (found["wilson"]["low"], found["wilson"]["high"]) == pytest.approx((low, high))
    a, b = 1 + true, 1 + 60 - true
    hdi = (found["beta"]["low"], found["beta"]["high"])
    assert beta.cdf(hdi[1], a, b) - beta.cdf(hdi[0], a, b) == pytest.approx(0.95, abs=1e-6)
    assert beta.pdf(hdi[0], a, b) == pytest.approx(beta.pdf(hdi[1], a, b), rel=1e-3)
    y = np.array([x.true for x in labels], dtype=float)
    score = {"T": 1.0, "F": 0.0, "NA": 0.5}
    yhat = np.array([score[verdicts[f]] for f in sample])
    yall = np.array([score[v] for v in verdicts.values()])
    ref_low, ref_high = ppi_mean_ci(y, yhat, yall, alpha=0.05, lam=None)
    mid = (float(ref_low[0]) + float(ref_high[0])) / 2
    half = (float(ref_high[0]) - float(ref_low[0])) / 2 * t.ppf(0.975, 59) / norm.ppf(0.975)
    assert found["ppi"]["estimate"] == pytest.approx(mid)
    assert found["margin"] == pytest.approx(half)
    assert found["reached"] == (half <= 0.1)


def test_beta_hdi_of_a_one_sided_posterior_starts_at_the_edge() -> None:
    low, high = beta_hdi(12, 1, 0.95)
    assert high == pytest.approx(1.0) and beta.cdf(low, 12, 1) == pytest.approx(0.05)


@pytest.mark.parametrize("extra", [(), ("--stratify", "verdict")])
def test_review_page_says_when_the_margin_is_reached(run_dir: Path, tmp_path: Path,
                                                     extra: tuple[str, ...]) -> None:
    copy = make_replay_run(tmp_path / "run", "gemma2:9b", limit=200)
    gold = {f: r["gold"] for f, r in read_verdicts(copy / "verdicts.jsonl").items()}
    server = start_review(copy, "--sample", "150", "--until-moe", "0.12", *extra)
    try:
        headers = {"X-Review-Token": server.token}
        state = httpx.get(f"{server.base}/api/state", headers=headers, timeout=10).json()
        assert state["estimate"]["labels"] == 0 and state["estimate"]["target"] == 0.12
        design = "stratified" if extra else "srs"
        reached_after = None
        for n, item in enumerate(state["items"], start=1):
            answer = httpx.post(f"{server.base}/api/decide", headers=headers, timeout=10,
                                json={"fact_id": item["fact_id"], "label": gold[item["fact_id"]]})
            estimate = answer.json()["estimate"]
            assert estimate["labels"] == n and estimate["design"] == design
            if estimate["reached"]:
                reached_after = n
                break
        assert reached_after is not None, estimate
        assert estimate["margin"] <= 0.12 and estimate["wilson"] and estimate["beta"]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("reached" in line
                                                      for line in server.output):
            time.sleep(0.1)
        said = [line for line in server.output if "margin of error" in line]
        assert said and re.search(rf"after {reached_after} labels", said[0]), server.output
    finally:
        stop_served(server)


@pytest.mark.slow
def test_the_page_shows_the_running_estimate_and_when_to_stop(
        browser, tmp_path: Path) -> None:  # noqa: F811 - the Chromium fixture
    driver = browser
    run = make_replay_run(tmp_path / "run", "gemma2:9b", limit=80)
    gold = {f: r["gold"] for f, r in read_verdicts(run / "verdicts.jsonl").items()}
    server = start_review(run, "--sample", "60", "--until-moe", "0.2")
    try:
        _open(driver, server.url)
        assert "No labels yet" in (_text(driver, "#estimate") or "") or \
            "0 labels" in (_text(driver, "#estimate") or "")
        reached = None
        for n in range(1, 61):
            fact = _current(driver)
            _press(driver, gold[fact].lower())
            _wait(driver, lambda d, n=n: f"{n} labels" in (_text(d, "#estimate-text") or ""),
                  f"the estimate did not count {n} labels")
            if "reached" in (_text(driver, "#margin") or ""):
                reached = n
                break
        assert reached is not None and reached >= 10
        assert (_text(driver, "#est-wilson") or "").startswith("Wilson: ")
        assert "%" in (_text(driver, "#est-beta") or "")
        assert (_text(driver, "#est-ppi") or "").startswith("PPI with the verdicts: ")
        assert "Margin of error ±" in (_text(driver, "#margin") or "")
    finally:
        stop_served(server)
