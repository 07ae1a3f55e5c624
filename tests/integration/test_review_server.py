"""`kgcheck review` as a person starts it: a real server on 127.0.0.1, its token, its
defences against other sites, and its answers to bad input (a second server, a stale token,
a taken port)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.review_runs import IMG, SCRIPT, label_rows, make_run, start_review
from tests.support.served import Served, stop_served


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[Served, Path]]:
    run_dir = make_run(tmp_path_factory.mktemp("review") / "run")
    server = start_review(run_dir, "--reviewer", "ana")
    yield server, run_dir
    stop_served(server)


def _api(server: Served, path: str, body: dict | None = None, **headers: str) -> httpx.Response:
    sent = {"X-Review-Token": server.token, **headers}
    if body is None:
        return httpx.get(f"{server.base}{path}", headers=sent, timeout=10)
    return httpx.post(f"{server.base}{path}", json=body, headers=sent, timeout=10)


def test_serves_on_loopback_with_a_token_on_every_request(served) -> None:
    server, _ = served
    assert server.url.startswith("http://127.0.0.1:") and "/?token=" in server.url
    page = httpx.get(server.url, timeout=10)
    assert page.status_code == 200 and "kgcheck review" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer"
    for path in ("/", "/static/review.js", "/api/state", "/nope"):
        refused = httpx.get(f"{server.base}{path}", timeout=10)
        assert refused.status_code == 403, path
        assert "open the address it printed" in refused.text
    wrong = httpx.get(f"{server.base}/api/state", headers={"X-Review-Token": "x" * 32},
                      timeout=10)
    assert wrong.status_code == 403 and wrong.json()["stale_token"] is True
    assert httpx.get(f"{server.base}/static/review.js?token={server.token}",
                     timeout=10).status_code == 200
    # A page on another name for this address (DNS rebinding) is not answered.
    rebound = httpx.get(server.url, headers={"Host": f"evil.example:{server.base.rsplit(':', 1)[1]}"},
                        timeout=10)
    assert rebound.status_code == 400


def test_text_from_the_kg_and_the_web_is_data_never_markup(served) -> None:
    server, _ = served
    page = httpx.get(server.url, timeout=10).text
    assert "Evil" not in page and "example.org" not in page  # no fact text in the HTML
    state = _api(server, "/api/state")
    assert state.headers["content-type"] == "application/json"
    item = next(i for i in state.json()["items"] if i["fact_id"] == "3")
    assert item["question"]["fact"]["subject"] == f"Evil{SCRIPT}"
    assert item["question"]["evidence"][0]["text"] == f"Evidence {IMG} and {SCRIPT} here."
    script = httpx.get(f"{server.base}/static/review.js?token={server.token}", timeout=10).text
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script


def test_cross_site_posts_are_refused(served) -> None:
    server, run_dir = served
    decision = {"fact_id": "1", "label": "F", "note": ""}
    # A form on another site can send neither the token header nor a JSON body.
    form = httpx.post(f"{server.base}/api/decide?token={server.token}",
                      data={"fact_id": "1", "label": "F"}, timeout=10)
    assert form.status_code == 403
    no_json = httpx.post(f"{server.base}/api/decide", content="fact_id=1&label=F",
                         headers={"X-Review-Token": server.token,
                                  "Content-Type": "text/plain"}, timeout=10)
    assert no_json.status_code == 415
    foreign = _api(server, "/api/decide", decision, Origin="https://evil.example")
    assert foreign.status_code == 403
    assert not (run_dir / "labels.csv").exists() or all(
        r["fact_id"] != "1" for r in label_rows(run_dir))


def test_decide_and_undo_over_the_api(served) -> None:
    server, run_dir = served
    saved = _api(server, "/api/decide", {"fact_id": "4", "label": "T", "note": "<b>sure</b>"})
    assert saved.status_code == 200 and saved.json()["saved"] is True
    assert saved.json()["review"]["reviewer"] == "ana"
    row = next(r for r in label_rows(run_dir) if r["fact_id"] == "4")
    assert (row["label"], row["note"], row["reviewer"]) == ("T", "<b>sure</b>", "ana")
    bad = _api(server, "/api/decide", {"fact_id": "4", "label": "maybe"})
    assert bad.status_code == 400 and "not one of T, F, skip" in bad.json()["error"]
    unknown = _api(server, "/api/decide", {"fact_id": "nope", "label": "T"})
    assert unknown.status_code == 400 and "not in this review's queue" in unknown.json()["error"]
    undone = _api(server, "/api/undo", {})
    assert undone.json()["undone"] == "4" and undone.json()["item"]["review"] is None
    assert all(r["fact_id"] != "4" for r in label_rows(run_dir))


def test_a_second_server_on_the_same_run_is_refused(served) -> None:
    server, run_dir = served
    kgcheck = Path(sys.executable).parent / "kgcheck"
    second = subprocess.run([str(kgcheck), "review", str(run_dir), "--port", "0"],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 2
    assert "another kgcheck review is serving" in second.stderr
    assert "Traceback" not in second.stderr + second.stdout


def test_a_taken_port_is_one_clear_line(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        kgcheck = Path(sys.executable).parent / "kgcheck"
        done = subprocess.run([str(kgcheck), "review", str(run_dir), "--port", str(port)],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"cannot serve on 127.0.0.1:{port}" in done.stderr and "--port" in done.stderr


def test_a_restarted_server_refuses_the_old_token_and_keeps_the_decisions(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    first = start_review(run_dir)
    try:
        assert _api(first, "/api/decide", {"fact_id": "2", "label": "F"}).status_code == 200
    finally:
        assert stop_served(first) == 130  # Ctrl-C
    second = start_review(run_dir)
    try:
        assert second.token != first.token
        stale = httpx.get(f"{second.base}/api/state", headers={"X-Review-Token": first.token},
                          timeout=10)
        assert stale.status_code == 403 and "restarted" in stale.json()["error"]
        state = _api(second, "/api/state").json()
        assert state["progress"]["decided"] == 1
        assert next(i for i in state["items"] if i["fact_id"] == "2")["review"]["label"] == "F"
    finally:
        stop_served(second)
    assert "Traceback" not in "".join(first.output + second.output)
