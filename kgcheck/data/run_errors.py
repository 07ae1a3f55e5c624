"""The errors a run and its folder raise, below every module that raises them.

``RunError`` (the run cannot start or go on) is raised by the run folder
(``kgcheck.data.runfolder``), by the shard stores a sharded run writes to
(``kgcheck.data.shard_store``, whose ``StoreError`` is one) and by the runners above them;
``RunFolderError`` by every reader of a run folder. Both say why in one line.
"""

from __future__ import annotations

from kgcheck.arguments import ArgumentMessage

__all__ = ["RunError", "RunFolderError"]


class RunError(ArgumentMessage, RuntimeError):
    """The run cannot start or go on; the message says why and what to do."""


class RunFolderError(ArgumentMessage, ValueError):
    """A folder that is not a run folder, or one whose files are malformed."""
