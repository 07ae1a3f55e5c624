"""Shared fixtures and the lanes: scripted chat models, free loopback ports, the vendored data.

Tests live in lanes (docs/development.md): ``tests/unit`` (in-process), ``tests/integration``
(real servers on loopback, the local model, Virtuoso, the CLI in a subprocess) and
``tests/e2e`` (Chromium, a Ray cluster, ``langgraph dev``, the wheel, the docs site, the
paper's figures over whole datasets); ``tests/support`` holds what they share. Each test is
marked with its lane's name, so ``-m "not e2e"`` selects as ``make test-fast`` does.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from tests.support.scripted import SCRIPTED, register_scripted
from tests.support.virtuoso import virtuoso  # noqa: F401 - a fixture for the SPARQL tests

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "factcheck-data"
TESTS = Path(__file__).resolve().parent
LANES = ("unit", "integration", "e2e")


# Files whose tests run on one xdist worker, one file after another: the Ray tests, since
# the cluster fixture's `ray stop --force` (test_ray_engine.py) stops every Ray process of
# the user, another file's cluster too.
SHARED_WORKER = {f"tests/e2e/test_ray_{name}.py": "ray" for name in ("engine", "pipeline",
                                                                   "leftovers")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its lane: the folder under tests/ it lives in.

    A test file outside a lane stops the session with one line naming it.
    """
    strays = set()
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts
        lane = parts[0] if len(parts) > 1 else ""
        if lane not in LANES:
            strays.add(str(item.path.relative_to(ROOT)))
            continue
        item.add_marker(getattr(pytest.mark, lane))
    if strays:
        raise pytest.UsageError(
            f"{', '.join(sorted(strays))}: a test file must live in one of tests/unit, "
            "tests/integration or tests/e2e (docs/development.md, Tests in lanes)")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadfile``, send each file whole to a worker, the Ray files together.

    A file's module-scoped servers and run folders are then built once; xdist's
    ``loadgroup`` would say the same with markers, but it renames test ids in a way
    pytest 9.2 ignores, so the groups are named here by file.
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return SHARED_WORKER.get(path, path)

    return LaneScheduling(config, log)


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item
                                  ) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Run async tests on asyncio's loop; those marked ``both_loops`` on uvloop's too.

    kgcheck's entry points run on uvloop (kgcheck.event_loop); an async caller keeps its own
    loop, so the transport's failure handling must read the same on both.
    """
    if item.get_closest_marker("both_loops") is None:
        return {"asyncio": ClosingLoop}
    import uvloop

    return {"asyncio": ClosingLoop, "uvloop": uvloop.new_event_loop}


class ClosingLoop(asyncio.SelectorEventLoop):
    """asyncio's loop that releases what kgcheck opened on it before it closes.

    A test is an async caller with a loop of its own: as for any such caller, the model
    calls' HTTP sessions stay open until the loop ends, and would be reported as unclosed
    when the worker exits. kgcheck's own loops do this in ``kgcheck.event_loop``.
    """

    def close(self) -> None:
        from kgcheck import event_loop

        if not self.is_closed() and not self.is_running():
            try:
                self.run_until_complete(event_loop._close_resources())
            except Exception:  # a closer failing must not fail the test's teardown
                pass
        super().close()


@pytest.fixture(autouse=True)
def answer_cache_dir(tmp_path_factory: pytest.TempPathFactory,
                     monkeypatch: pytest.MonkeyPatch) -> Path:
    """Give each test its own answer cache, so that no test is served another's answers."""
    folder = tmp_path_factory.mktemp("answer-cache")
    monkeypatch.setenv("KGCHECK_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def scripted() -> Iterator[Callable[[str, list[str]], str]]:
    """Register ``scripted:<name>`` answering the given texts in order; returns the spec.

    Each resolution builds a fresh model over the same shared iterator, so a graph that
    resolves the model once per call still walks through the script in order.
    """
    added: list[str] = []

    def make(name: str, answers: list[str]) -> str:
        messages = iter([AIMessage(content=a) for a in answers])
        register_scripted(name, lambda: GenericFakeChatModel(messages=messages))
        added.append(name)
        return f"scripted:{name}"

    yield make
    for name in added:
        SCRIPTED.pop(name, None)


@pytest.fixture
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset the OpenAI variables, so that a test reaches only the stub it names."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[Any]:
    """moto's S3 server on loopback, one per test session (tests.support.stubs.object_store)."""
    pytest.importorskip("s3fs", reason="pip install 'kgcheck[s3]' moto[server] (make install)")
    pytest.importorskip("moto.server", reason="pip install 'moto[server]' (make install)")
    from tests.support.stubs.object_store import S3Endpoint

    endpoint = S3Endpoint()
    yield endpoint
    endpoint.stop()


@pytest.fixture
def s3(s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The S3 endpoint, with this process's environment pointing the storage client at it."""
    for name, value in s3_endpoint.env.items():
        monkeypatch.setenv(name, value)
    # fsspec keeps a client per URL's options, made from the environment of its time: each
    # test starts from, and leaves, none (a test may point the environment elsewhere).
    s3_endpoint.fs().clear_instance_cache()
    yield s3_endpoint
    s3_endpoint.fs().clear_instance_cache()


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
