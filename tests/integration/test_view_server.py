"""The explorer's data and API: filters count what they must, pages, the index cache, the guard."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kgcheck.view.explorer import Explorer, ExplorerError, FactQuery
from kgcheck.view.index import index_dir, index_path
from kgcheck.view.server import TOKEN_HEADER, create_app
from tests.support.view_runs import (
    HOSTILE_ID,
    PREDICATES,
    confidence_of,
    fact_id,
    failed,
    gold_of,
    label_of,
    make_view_run,
)

N = 120
TOKEN = "t0ken"


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    return (make_view_run(tmp_path / "a", N), make_view_run(tmp_path / "b", N, shift=2,
                                                              run_id="view0002"))


@pytest.fixture
def client(runs: tuple[Path, Path]):
    explorer = Explorer(list(runs))
    app = create_app(explorer, TOKEN, {"testserver"})
    with TestClient(app, headers={TOKEN_HEADER: TOKEN}) as c:
        yield c
    explorer.close()


def _ids(rows: list[dict]) -> list[str]:
    return [r["fact_id"] for r in rows]


def test_filters_keep_exactly_the_facts_they_name(client: TestClient) -> None:
    expect = {
        "wrong": [i for i in range(N) if label_of(i) in "TF" and label_of(i) != gold_of(i)],
        "na": [i for i in range(N) if label_of(i) == "NA"],
        "nei": [i for i in range(N) if label_of(i) == "NA" and not failed(i)],
        "failed": [i for i in range(N) if failed(i)],
        # The confidence is P(T): a confident F (P(T) 0.1) is no low-confidence verdict.
        "low": [i for i in range(N) if max(confidence_of(i), 1 - confidence_of(i)) < 0.6],
    }
    for name, facts in expect.items():
        body = client.get("/api/facts", params={"filters": name, "size": 500}).json()
        assert body["total"] == len(facts), name
        assert _ids(body["rows"]) == [fact_id(i) for i in facts], name
    both = client.get("/api/facts", params={"filters": "wrong,low", "predicate": "team",
                                            "size": 500}).json()
    assert _ids(both["rows"]) == [fact_id(i) for i in expect["wrong"]
                                  if max(confidence_of(i), 1 - confidence_of(i)) < 0.6
                                  and PREDICATES[i % 5] == "team"]
    other = client.get("/api/facts", params={"other": 1, "size": 500}).json()
    assert _ids(other["rows"]) == [fact_id(i) for i in range(N)
                                   if label_of(i) != label_of(i, 2)]
    assert all(r["other_label"] == label_of(int(r["fact_id"][1:]), 2) for r in other["rows"])


def test_pages_follow_the_run_order(client: TestClient) -> None:
    seen: list[str] = []
    for page in range(5):
        body = client.get("/api/facts", params={"page": page, "size": 25}).json()
        assert body["total"] == N
        seen += _ids(body["rows"])
    assert seen == [fact_id(i) for i in range(N)]


def test_the_fact_page_reads_the_last_record_of_a_fact(runs: tuple[Path, Path]) -> None:
    folder = runs[0]
    later = {"fact_id": fact_id(0), "label": "F", "raw": "checked again", "details": {},
             "gold": "T", "subject": "S", "predicate": "award", "object": "O"}
    with (folder / "verdicts.jsonl").open("a") as fh:
        fh.write(json.dumps(later) + "\n{torn")
    explorer = Explorer([folder])
    try:
        fact = explorer.fact(0, fact_id(0))
        assert fact["record"]["raw"] == "checked again"
        assert fact["truth"] == "T"
        page = explorer.facts(FactQuery(size=3))
        assert page["total"] == N and page["rows"][0]["fact_id"] == fact_id(0)
        assert page["rows"][0]["label"] == "F"  # the last record counts, in the first place
    finally:
        explorer.close()


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def test_the_index_is_cached_and_rebuilt_when_the_verdicts_change(runs,
                                                                  answer_cache_dir) -> None:
    folder = runs[0]
    before = _tree(folder)
    Explorer([folder]).close()
    assert _tree(folder) == before  # nothing is written in the run folder
    index = index_path(folder)
    assert index.parent == answer_cache_dir / "view" == index_dir()
    built = index.stat().st_mtime_ns
    Explorer([folder]).close()
    assert index.stat().st_mtime_ns == built  # reused
    with (folder / "verdicts.jsonl").open("a") as fh:
        fh.write(json.dumps({"fact_id": "extra", "label": "T", "gold": "T"}) + "\n")
    explorer = Explorer([folder])
    try:
        assert explorer.facts(FactQuery())["total"] == N + 1
    finally:
        explorer.close()
    assert not list(index.parent.glob("*.tmp")) and not list(folder.glob("*.tmp"))


def test_a_rewrite_of_the_same_size_and_time_is_indexed_again(runs) -> None:
    import os

    folder = runs[0]
    verdicts = folder / "verdicts.jsonl"
    Explorer([folder]).close()
    stat = verdicts.stat()
    # Another run's verdicts of the same length, written within the clock's resolution.
    text = verdicts.read_text().replace('"label": "NA"', '"label": "T" ')
    assert len(text) == stat.st_size
    verdicts.write_text(text)
    os.utime(verdicts, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    explorer = Explorer([folder])
    try:
        assert explorer.facts(FactQuery(filters=["na"]))["total"] == 0
        assert explorer.record(0, fact_id(3))["label"] == "T"
    finally:
        explorer.close()


def test_an_unwritable_cache_gets_a_temporary_index(runs, monkeypatch) -> None:
    import kgcheck.view.index as index

    def refused(path):
        raise PermissionError(13, "Permission denied", str(path))

    # Root may write into a read-only folder: refuse the write where it happens instead.
    monkeypatch.setattr(index, "atomic_path", refused)
    folder = runs[0]
    before = _tree(folder)
    explorer = Explorer([folder])
    assert explorer.facts(FactQuery())["total"] == N
    assert explorer.runs[0].temporary and not index_path(folder).exists()
    assert _tree(folder) == before
    explorer.close()
    assert not explorer.runs[0].index.exists()


def test_reviews_overrule_gold_and_clusters_filter(runs, tmp_path: Path) -> None:
    folder = runs[0]
    (folder / "labels.csv").write_text(
        "fact_id,label,note,reviewer,reviewed_at\n"
        f"{fact_id(2)},F,,ana,2026-01-01T00:00:00Z\n")  # fact 2: gold T, model T
    errors = tmp_path / "errors"
    errors.mkdir()
    (errors / "errors.jsonl").write_text("".join(
        json.dumps({"run": "a", "fact_id": fact_id(i), "explanation": "x", "cluster": i % 2,
                    "cluster_label": f"family {i % 2}"}) + "\n" for i in (5, 10, 15)))
    explorer = Explorer([folder], errors=errors)
    try:
        wrong = _ids(explorer.facts(FactQuery(filters=["wrong"], size=500))["rows"])
        assert fact_id(2) in wrong and label_of(2) == gold_of(2)
        assert _ids(explorer.facts(FactQuery(cluster=1))["rows"]) == [fact_id(5), fact_id(15)]
        assert explorer.clusters(0) == [{"cluster": 0, "label": "family 0", "facts": 1},
                                        {"cluster": 1, "label": "family 1", "facts": 2}]
    finally:
        explorer.close()


def test_the_diff_tests_the_pairs_with_mcnemar(client: TestClient) -> None:
    from statsmodels.stats.contingency_tables import mcnemar

    body = client.get("/api/diff", params={"a": 0, "b": 1, "size": 500}).json()
    a_right = [label_of(i) == gold_of(i) for i in range(N)]
    b_right = [label_of(i, 2) == gold_of(i) for i in range(N)]
    only_a = sum(x and not y for x, y in zip(a_right, b_right, strict=True))
    only_b = sum(y and not x for x, y in zip(a_right, b_right, strict=True))
    both = sum(x and y for x, y in zip(a_right, b_right, strict=True))
    m = body["mcnemar"]
    assert (m["only_a"], m["only_b"]) == (only_a, only_b)
    assert m["table"] == [[both, only_a], [only_b, N - both - only_a - only_b]]
    assert body["disagree"] == sum(label_of(i) != label_of(i, 2) for i in range(N))
    assert body["total"] == body["disagree"] == len(body["rows"])
    assert m["p_value"] == pytest.approx(mcnemar(m["table"], exact=True).pvalue)


def test_the_calibration_bins_are_scikit_learns() -> None:
    import numpy as np
    from sklearn.calibration import calibration_curve

    from kgcheck.evals.calibration import reliability

    rng = np.random.default_rng(0)
    conf = rng.uniform(0, 1, 400)
    right = rng.uniform(0, 1, 400) < conf
    stats = reliability(conf.tolist(), right.tolist(), bins=10)
    share, mean = calibration_curve(right.astype(int), conf, n_bins=10)
    assert stats["share_right"] == pytest.approx(share.tolist())
    assert stats["mean_confidence"] == pytest.approx(mean.tolist())
    assert sum(stats["count"]) == 400
    bins = np.minimum((conf * 10).astype(int), 9)
    ece = sum(abs(right[bins == b].mean() - conf[bins == b].mean()) * (bins == b).sum()
              for b in range(10) if (bins == b).any()) / 400
    assert stats["ece"] == pytest.approx(ece)


def test_figures_render_for_runs_with_scores(client: TestClient) -> None:
    figures = client.get("/api/runs").json()["figures"]
    ids = {f["id"] for f in figures}
    assert {"f1:Mine", "time:Mine", "upset:Mine:DKA", "calibration:0"} <= ids
    for figure in figures:
        response = client.get(f"/figure/{figure['id']}.png", params={"token": TOKEN})
        assert response.status_code == 200, figure
        assert response.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.get("/figure/f1:Elsewhere.png", params={"token": TOKEN}).status_code == 404


def test_the_guard_is_the_review_pages(runs) -> None:
    explorer = Explorer([runs[0]])
    app = create_app(explorer, TOKEN, {"testserver"})
    try:
        with TestClient(app) as c:
            assert c.get("/api/runs").status_code == 403
            assert c.get("/api/runs", headers={TOKEN_HEADER: "old"}).json()["stale_token"]
            page = c.get("/", params={"token": TOKEN})
            assert page.status_code == 200
            assert "script-src 'self'" in page.headers["content-security-policy"]
            assert page.headers["x-frame-options"] == "DENY"
            assert c.get("/", params={"token": TOKEN},
                         headers={"host": "evil.example:80"}).status_code == 400
            assert c.get("/static/../server.py", params={"token": TOKEN}).status_code == 404
            bad = c.get("/api/facts", params={"filters": "nope"}, headers={TOKEN_HEADER: TOKEN})
            assert bad.status_code == 400 and "unknown filter nope" in bad.json()["error"]
            missing = c.get("/api/fact", params={"id": "none"}, headers={TOKEN_HEADER: TOKEN})
            assert "no verdict for fact 'none'" in missing.json()["error"]
    finally:
        explorer.close()


def test_the_hostile_fact_comes_back_as_data(client: TestClient) -> None:
    fact = client.get("/api/fact", params={"run": 0, "id": HOSTILE_ID}).json()
    assert fact["record"]["subject"].startswith("Evil<script>")
    assert fact["record"]["conversation"][3]["node"] == "reprompt"


@pytest.mark.parametrize(("args", "message"), [
    (["{tmp}/nothing"], "run folder not found"),
    (["{tmp}"], "is not a kgcheck run folder (no run.json)"),
])
def test_bad_input_gets_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    kgcheck = Path(sys.executable).parent / "kgcheck"
    done = subprocess.run([str(kgcheck), "view", *[a.format(tmp=tmp_path) for a in args],
                           "--port", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert done.stdout == ""


def test_explorer_needs_verdicts(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(ExplorerError, match="no verdicts.jsonl"):
        Explorer([tmp_path])


HOSTILE_QUERIES = [
    ("/api/facts", {"page": "99999999999999999999"}, "page=99999999999999999999"),
    ("/api/facts", {"page": str(2**63 - 1)}, "page="),
    ("/api/facts", {"cluster": str(2**63)}, "cluster="),
    ("/api/facts", {"cluster": "99999999999999999999"}, "cluster="),
    ("/api/facts", {"size": "0"}, "size=0"),
    ("/api/facts", {"low": "nan"}, "low=nan"),
    ("/api/facts", {"other": str(2**64)}, "other="),
    ("/api/facts", {"page": "x"}, "page=x"),
    ("/api/predicates", {"run": "-1"}, "run=-1"),
    ("/api/fact", {"run": str(2**64), "id": "f00001"}, "run="),
    ("/api/fact", {}, "id: Field required"),
    ("/api/diff", {"page": str(2**62)}, "page="),
    ("/api/diff", {"a": "1e3"}, "a=1e3"),
]


@pytest.mark.parametrize(("path", "params", "named"), HOSTILE_QUERIES)
def test_a_query_out_of_range_is_400_with_the_headers(runs, path, params, named) -> None:
    from kgcheck.web.guard import SECURITY_HEADERS

    explorer = Explorer(list(runs))
    try:
        with TestClient(create_app(explorer, TOKEN, {"testserver"}),
                        headers={TOKEN_HEADER: TOKEN}, raise_server_exceptions=False) as c:
            reply = c.get(path, params=params)
    finally:
        explorer.close()
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert named in error and "\n" not in error, error
    assert {k: reply.headers.get(k) for k in SECURITY_HEADERS} == SECURITY_HEADERS


def test_a_failure_is_one_line_with_the_headers_on_both_pages(runs, monkeypatch) -> None:
    from kgcheck.review.server import create_app as review_app
    from kgcheck.web.guard import SECURITY_HEADERS

    def broken(*args, **kwargs):
        raise RuntimeError("a failure deep in a query")

    class BrokenSession:
        async def decide(self, *args, **kwargs):
            broken()

    explorer = Explorer(list(runs))
    monkeypatch.setattr(explorer, "facts", broken)
    try:
        with TestClient(create_app(explorer, TOKEN, {"testserver"}),
                        headers={TOKEN_HEADER: TOKEN}, raise_server_exceptions=False) as c:
            replies = [c.get("/api/facts"), c.get("/nowhere")]
    finally:
        explorer.close()
    with TestClient(review_app(BrokenSession(), TOKEN, {"testserver"}),
                    headers={"X-Review-Token": TOKEN}, raise_server_exceptions=False) as c:
        replies += [c.post("/api/decide", json={"fact_id": "f1", "label": "T"}),
                    c.post("/api/decide", json={"fact_id": "f1", "label": "T" * 11})]
    assert [r.status_code for r in replies] == [500, 404, 500, 400]
    for reply in replies:
        assert {k: reply.headers.get(k) for k in SECURITY_HEADERS} == SECURITY_HEADERS
    assert replies[0].json() == replies[2].json() == {
        "error": "the server failed on this request (RuntimeError); its log has the details"}
    assert replies[3].json()["error"].startswith("label=TTTTTTTTTTT: String should have at most")


MATH_DATASET = "x$\\undefinedcmd{$"


def _rewrite(folder: Path, *, gold: bool = True, dataset: str | None = None,
             model: str | None = None) -> Path:
    """Drop the gold labels, or rename the dataset or the first model, of a written run."""
    info = json.loads((folder / "run.json").read_text())
    lines = [json.loads(line) for line in (folder / "verdicts.jsonl").read_text().splitlines()]
    old_model = info["models"][0]
    for record in lines:
        if not gold:
            record.pop("gold", None)
        if dataset:
            record["dataset"] = dataset
        for vote in record["details"].get("votes", []):
            if model and vote["model"] == old_model:
                vote["model"] = model
    info["dataset"] = dataset or info["dataset"]
    info["models"] = [model or old_model, *info["models"][1:]]
    (folder / "run.json").write_text(json.dumps(info))
    (folder / "verdicts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return folder


RUN_KINDS = {
    "two runs with gold": (lambda t: [make_view_run(t / "a", 40),
                                      make_view_run(t / "b", 40, shift=2, run_id="v2")],
                           {"f1:Mine", "time:Mine", "upset:Mine:DKA", "calibration:0",
                            "calibration:1"}),
    "one run with gold": (lambda t: [make_view_run(t / "a", 40)],
                          {"f1:Mine", "time:Mine", "calibration:0"}),
    "a consensus with gold": (lambda t: [make_view_run(t / "c", 40, consensus=True)],
                              {"f1:Mine", "upset:Mine:DKA", "calibration:0"}),
    "two runs without gold": (lambda t: [
        _rewrite(make_view_run(t / "a", 40), gold=False),
        _rewrite(make_view_run(t / "b", 40, shift=2, run_id="v2"), gold=False)], set()),
    "a consensus without gold": (lambda t: [
        _rewrite(make_view_run(t / "c", 40, consensus=True), gold=False)], set()),
    "names holding mathtext": (lambda t: [
        _rewrite(make_view_run(t / "r$\\frac{$", 40, consensus=True), dataset=MATH_DATASET,
                 model="m$\\bad{$")],
        {f"f1:{MATH_DATASET}", f"upset:{MATH_DATASET}:DKA", "calibration:0"}),
}


@pytest.mark.parametrize("kind", list(RUN_KINDS))
def test_every_listed_figure_is_drawn(tmp_path: Path, kind: str) -> None:
    make, expected = RUN_KINDS[kind]
    explorer = Explorer(make(tmp_path))
    try:
        with TestClient(create_app(explorer, TOKEN, {"testserver"}),
                        headers={TOKEN_HEADER: TOKEN}, raise_server_exceptions=False) as c:
            listed = c.get("/api/runs").json()["figures"]
            assert {f["id"] for f in listed} == expected
            for figure in listed:
                reply = c.get(f"/figure/{figure['id']}.png")
                assert reply.status_code == 200, (figure, reply.text[:200])
                assert reply.content[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        explorer.close()


def test_a_record_longer_than_the_cap_is_refused(runs, monkeypatch) -> None:
    monkeypatch.setenv("KGCHECK_VIEW_MAX_RECORD_BYTES", "100")
    explorer = Explorer([runs[0]])
    try:
        with pytest.raises(ExplorerError, match=r"expected at most 100 bytes "
                                                r"\(\$KGCHECK_VIEW_MAX_RECORD_BYTES\)"):
            explorer.record(0, fact_id(1))
    finally:
        explorer.close()
    monkeypatch.setenv("KGCHECK_VIEW_MAX_RECORD_BYTES", "lots")
    with pytest.raises(ExplorerError, match=r"KGCHECK_VIEW_MAX_RECORD_BYTES='lots': expected"):
        Explorer([runs[0]])


def test_the_command_says_where_it_keeps_its_indexes(runs, answer_cache_dir) -> None:
    from tests.support.served import stop_served
    from tests.support.view_runs import start_view

    served = start_view(str(runs[0]))
    try:
        deadline = time.monotonic() + 30
        while len(served.output) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop_served(served)
    told = served.output[2]
    assert "writes nothing in the run folders" in told and str(answer_cache_dir / "view") in told


def test_a_wrong_index_row_says_which_index_to_delete(runs) -> None:
    import sqlite3

    folder = runs[0]
    Explorer([folder]).close()
    index = index_path(folder)
    conn = sqlite3.connect(index)
    with conn:
        conn.execute("UPDATE facts SET file = 'elsewhere.jsonl' WHERE fact_id = ?",
                     (fact_id(1),))
    conn.close()
    explorer = Explorer([folder])
    try:
        with pytest.raises(ExplorerError) as refused:
            explorer.record(0, fact_id(1))
    finally:
        explorer.close()
    assert f"delete {index} and restart kgcheck view" in str(refused.value)
    index.unlink()
    explorer = Explorer([folder])
    try:
        assert explorer.record(0, fact_id(1))["fact_id"] == fact_id(1)
    finally:
        explorer.close()


def test_the_review_command_of_a_fact_runs_as_printed(tmp_path: Path) -> None:
    import shlex

    from typer.testing import CliRunner

    from kgcheck.cli import app

    folder = make_view_run(tmp_path / "my runs $HOME" / "a", 6)
    explorer = Explorer([folder])
    try:
        app_ = create_app(explorer, TOKEN, {"testserver"})
        with TestClient(app_, headers={TOKEN_HEADER: TOKEN}) as c:
            found = c.get("/api/fact", params={"id": fact_id(0)}).json()
    finally:
        explorer.close()
    words = shlex.split(found["review_command"])
    assert words[:3] == ["kgcheck", "review", str(folder)]
    # The CLI's parser takes it as printed (--help stops it before a server starts).
    result = CliRunner().invoke(app, [*words[1:], "--help"])
    assert result.exit_code == 0, result.output
