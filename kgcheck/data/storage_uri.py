"""A storage URL (``s3://bucket/run``, ``gs://...``, ``abfs://...``): what it is, how to show it.

Both a sharded run's remote shard store (``kgcheck.data.shard_store``) and an input file at
a URL (``kgcheck.data.input_uri``) are named by an fsspec URL. What the two share lives
here: telling a URL from a local path, showing one without the credentials it may hold, and
saying why its storage cannot be used on this machine.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["is_uri", "shown", "storage_problem"]


def is_uri(text: str | Path) -> bool:
    """Tell whether ``text`` names a remote store (a URL other than ``file://``)."""
    scheme, sep, _ = str(text).partition("://")
    return bool(sep) and scheme.isidentifier() and scheme.lower() not in ("file", "local")


def storage_problem(uri: str) -> str | None:
    """Say why a URI's storage cannot be used here (None: its fsspec protocol is installed)."""
    import fsspec

    protocol = str(uri).partition("://")[0].lower()
    try:
        fsspec.get_filesystem_class(protocol)
    except ImportError as exc:
        package = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs",
                   "abfs": "adlfs", "az": "adlfs"}.get(protocol)
        fix = f"pip install {package}" if package else str(exc).splitlines()[0]
        return f"the {protocol}:// storage needs a package that is not installed ({fix})"
    except ValueError:
        return f"no storage is known for {protocol}:// (fsspec protocols: s3, gs, abfs, ...)"
    return None


def shown(uri: str) -> str:
    """Return a store's URI as it may be shown: any credentials in it left out."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host.rpartition('@')[2]}{slash}{path}"
