"""One registry mechanism for every kind of plugin.

Strategies, model providers, verdict parsers, evidence sources, embedders, document
selectors and index backends all register here.

A ``Registry`` maps names to entries. An entry is the object itself or a lazy
``"module:attr"`` reference, imported on first lookup (so a provider's client library is
imported only by the runs that use it). Built-ins come from a ``discover`` hook; installed
packages add entries through an entry-point group (``kgcheck.strategies``,
``kgcheck.providers``, ...), each entry point naming one entry. Registering a name twice is
an error, an unknown name lists the known ones, and tests remove what they added with
``unregister``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Hashable, Iterator
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class RegistryError(ValueError):
    """A registration that cannot be accepted: a duplicate name or a broken reference."""


class UnknownNameError(LookupError, ValueError):
    """No entry is registered under that name; the message lists the known ones."""


def load_reference(reference: str) -> object:
    """Import ``"package.module:attr"`` (or a bare module) and return what it names."""
    module_name, _, attr = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistryError(f"cannot import {module_name!r} (from {reference!r}): {exc}") from exc
    if not attr:
        return module
    target: object = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise RegistryError(f"{module_name!r} has no attribute {attr!r} (from "
                                f"{reference!r})") from None
    return target


class Registry(Generic[T]):
    """Entries of one plugin kind, by name.

    Args:
        kind: What an entry is, for messages ("strategy", "model provider").
        group: The entry-point group that installed packages register under.
        discover: Called once before the first lookup to register the built-ins (for
            example by importing every module of a package).
        unknown: The error raised for an unknown name (a subclass of UnknownNameError).

    """

    def __init__(self, kind: str, *, group: str | None = None,
                 discover: Callable[[], None] | None = None,
                 unknown: type[UnknownNameError] = UnknownNameError) -> None:
        self.kind = kind
        self.group = group
        self._discover = discover
        self._unknown = unknown
        self._entries: dict[str, T | str] = {}
        self._origins: dict[str, str] = {}
        self._built: dict[tuple[Any, ...], Any] = {}
        self._ready = False
        self._lock = threading.RLock()

    @staticmethod
    def key(name: str) -> str:
        """Normalise a name: case and surrounding blanks do not matter."""
        return name.strip().lower()

    def register(self, name: str, entry: T | str, *, origin: str = "") -> None:
        """Add ``entry`` (an object or a ``"module:attr"`` reference) under ``name``."""
        key = self.key(name)
        if not key:
            raise RegistryError(f"a {self.kind} needs a non-empty name")
        with self._lock:
            current = self._entries.get(key)
            # A module named by a lazy reference may register its own entry on import.
            resolving = isinstance(current, str) and not isinstance(entry, str)
            if current is not None and current is not entry and not resolving:
                where = self._origins.get(key) or "an earlier registration"
                raise RegistryError(
                    f"{self.kind} {name!r} is already registered (by {where}); pick another "
                    "name, or unregister the first one"
                )
            self._entries[key] = entry
            self._origins[key] = origin or (entry if isinstance(entry, str) else "code")

    def unregister(self, name: str) -> None:
        """Remove an entry (tests use this to undo what they registered)."""
        with self._lock:
            self._entries.pop(self.key(name), None)
            self._origins.pop(self.key(name), None)
            self._built = {k: v for k, v in self._built.items() if k[0] != self.key(name)}

    def _ensure_ready(self) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            # Mark first: the discover hook registers through register(), which may look up.
            self._ready = True
            try:
                if self._discover is not None:
                    self._discover()
                if self.group:
                    for point in entry_points(group=self.group):
                        self._add_entry_point(point.name, point.value)
            except BaseException:
                # Half a discovery is not a registry: the next lookup tries again.
                self._ready = False
                raise

    def _add_entry_point(self, name: str, value: str) -> None:
        if ":" in value:
            self.register(name, value, origin=f"entry point {self.group}:{name} = {value}")
            return
        # A bare module registers its own entries when imported (the older plugin form).
        load_reference(value)
        if self.key(name) not in self._entries:
            raise RegistryError(
                f"entry point {self.group}:{name} imported {value!r}, which registered no "
                f"{self.kind} named {name!r}"
            )

    def names(self) -> list[str]:
        """Every registered name, sorted, without importing lazy entries."""
        self._ensure_ready()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._ensure_ready()
        return isinstance(name, str) and self.key(name) in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def get(self, name: str) -> T:
        """Return the entry named ``name``, importing it if it is a lazy reference."""
        key = self.key(name)
        self._ensure_ready()
        # Looked up on every model call: loaded entries are served without the lock.
        entry = self._entries.get(key)
        if entry is not None and not isinstance(entry, str):
            return entry
        if entry is None:
            known = ", ".join(self.names()) or "none"
            raise self._unknown(f"unknown {self.kind} {name.strip()!r}; known: {known}")
        with self._lock:
            entry = self._entries[key]
            if not isinstance(entry, str):
                return entry
            loaded = load_reference(entry)
            current = self._entries[key]
            if not isinstance(current, str) and current is not loaded and entry.count(":"):
                raise RegistryError(f"{self.kind} {name!r}: {entry!r} names one object, but "
                                    "importing it registered another under the same name")
            self._entries[key] = loaded  # type: ignore[assignment]
            return loaded  # type: ignore[return-value]

    def create(self, spec: str, *, finish: Callable[[Any], Any] | None = None,
               **options: Hashable) -> Any:
        """Build the plugin that ``name[:argument]`` names, once per spec and options.

        The entry is a factory called as ``factory(argument, **options)`` (``hf:BAAI/bge``
        -> ``factory("BAAI/bge")``); ``finish`` wraps what it returns. Built plugins are
        kept: an embedder loads its model once, an index opens its collection once.
        """
        name, _, argument = spec.strip().partition(":")
        key = (self.key(name), argument.strip(), finish, tuple(sorted(options.items())))
        with self._lock:
            if key in self._built:
                return self._built[key]
        factory: Any = self.get(name)
        built = factory(argument.strip(), **options)
        if finish is not None:
            built = finish(built)
        with self._lock:
            return self._built.setdefault(key, built)

    def items(self) -> dict[str, T]:
        """Every entry by name, lazy ones imported."""
        return {name: self.get(name) for name in self.names()}
