"""The one registry mechanism: lazy references, duplicates, unknown names, plugins, building."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint

import pytest

from kgcheck.registry import Registry, RegistryError, UnknownNameError


class UnknownColour(UnknownNameError):
    pass


def test_lazy_reference_is_imported_on_first_lookup(tmp_path, monkeypatch) -> None:
    (tmp_path / "lazy_colours.py").write_text("RED = 'red'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    colours = Registry("colour", unknown=UnknownColour)
    colours.register("red", "lazy_colours:RED")
    assert "lazy_colours" not in sys.modules
    assert colours.names() == ["red"]  # listing does not import
    assert "lazy_colours" not in sys.modules
    assert colours.get(" RED ") == "red"
    assert "lazy_colours" in sys.modules


def test_duplicates_unknown_names_and_removal() -> None:
    colours: Registry[str] = Registry("colour", unknown=UnknownColour)
    colours.register("red", "rouge")
    colours.register("red", "rouge")  # the same entry again is harmless
    with pytest.raises(RegistryError, match="colour 'Red' is already registered"):
        colours.register("Red", "rot")
    with pytest.raises(UnknownColour, match="unknown colour 'blue'; known: red"):
        colours.get("blue")
    colours.unregister("red")
    assert "red" not in colours


def test_broken_reference_names_the_problem() -> None:
    colours: Registry[str] = Registry("colour")
    colours.register("green", "no_such_module_anywhere:GREEN")
    with pytest.raises(RegistryError, match="cannot import 'no_such_module_anywhere'"):
        colours.get("green")


def test_entry_points_add_lazy_entries(monkeypatch, tmp_path) -> None:
    (tmp_path / "plugin_colours.py").write_text("BLUE = 'blue'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [EntryPoint("blue", "plugin_colours:BLUE", "kgcheck.colours")]
    monkeypatch.setattr("kgcheck.registry.entry_points",
                        lambda group: points if group == "kgcheck.colours" else [])
    colours: Registry[str] = Registry("colour", group="kgcheck.colours",
                                      discover=lambda: colours.register("red", "rouge"))
    assert colours.names() == ["blue", "red"]
    assert colours.get("blue") == "blue"


def test_a_plugin_that_reuses_a_builtin_name_is_an_error(monkeypatch) -> None:
    points = [EntryPoint("red", "plugin_colours:RED", "kgcheck.colours")]
    monkeypatch.setattr("kgcheck.registry.entry_points", lambda group: points)
    colours: Registry[str] = Registry("colour", group="kgcheck.colours",
                                      discover=lambda: colours.register("red", "rouge"))
    with pytest.raises(RegistryError, match="already registered"):
        colours.names()


def test_a_failed_discovery_is_tried_again() -> None:
    attempts = []

    def discover() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise ImportError("first time")
        colours.register("red", "rouge")

    colours: Registry[str] = Registry("colour", discover=discover)
    with pytest.raises(ImportError):
        colours.names()
    assert colours.names() == ["red"] and len(attempts) == 2


def test_create_builds_once_per_spec_and_options() -> None:
    built = []

    def factory(argument: str, *, size: int = 1) -> tuple[str, int]:
        built.append((argument, size))
        return (argument, size)

    makers: Registry = Registry("maker")
    makers.register("box", factory)
    assert makers.create("box:a") is makers.create("box:a")
    assert makers.create("box:a", size=2) == ("a", 2)
    assert makers.create("box:b", finish=list) == ["b", 1]
    assert built == [("a", 1), ("a", 2), ("b", 1)]


def test_registries_of_every_plugin_kind() -> None:
    from kgcheck.graphs.parsing import PARSERS
    from kgcheck.graphs.registry import STRATEGIES
    from kgcheck.providers import PROVIDERS
    from kgcheck.retrievers.embeddings import EMBEDDERS
    from kgcheck.retrievers.index import INDEXES
    from kgcheck.retrievers.selection import SELECTORS
    from kgcheck.retrievers.store import SOURCES

    kinds = {r.kind: (r.group, set(r.names())) for r in (
        STRATEGIES, PROVIDERS, PARSERS, SOURCES, EMBEDDERS, SELECTORS, INDEXES)}
    # The strategies, and the graphs of the other kinds: review (served, never run as a
    # method) and consensus (runs a strategy for several models).
    assert kinds["strategy"] == ("kgcheck.strategies", {"dka", "dka-sc", "giv-z", "giv-f",
                                                        "rag", "schema", "review",
                                                        "consensus"})
    assert kinds["model provider"][1] >= {"ollama", "openai", "openai-compatible", "replay"}
    assert kinds["verdict parser"][1] == {"strict", "last-line", "yes-no-json", "strict-nei", "yes-no-nei-json"}
    assert kinds["evidence source"][1] == {"folder", "tarball", "store", "search-api"}
    assert kinds["embedder"][1] >= {"minilm", "ollama", "openai", "hf"}
    assert kinds["document selector"][1] == {"fusion", "cross-encoder"}
    assert kinds["index backend"][1] == {"chroma", "memory"}
    assert all(group and group.startswith("kgcheck.") for group, _ in kinds.values())

