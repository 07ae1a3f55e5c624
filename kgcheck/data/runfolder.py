"""The run folder: the one module that names its files and reads and writes them.

A run folder (``kgcheck run --out RUN``) holds::

    RUN/run.json        what the run is: strategy, models, input fingerprint, settings, prompts
    RUN/verdicts.jsonl  one verdict record per line, appended as each fact completes;
                        the last valid record per fact counts
    RUN/shards/         a sharded run's verdicts instead (``kgcheck run --engine ray`` over a
                        whole file): ``plan.json`` (the shards: byte ranges of the input),
                        ``NNNNN.jsonl`` (shard NNNNN's verdicts, appended as in
                        verdicts.jsonl) and ``NNNNN.done`` (written once the shard is
                        finished, with its summary figures)
    RUN/summary.json    scores and counts over every verdict in the folder
    RUN/labels.csv      a person's decisions (``kgcheck review``)
    RUN/estimate.json   the KG's accuracy estimate (``kgcheck estimate``)
    RUN/review.sqlite   the review graph's checkpoints
    RUN/plots/          figures
    RUN/.lock           held by the one process writing the folder
    RUN/.resume-index.sqlite  a resume's index of verdicts.jsonl (``kgcheck.data.verdict_index``),
                        there while the run goes on

Every file but the verdict files is replaced whole (``kgcheck.data.atomic``); verdict files
are appended one whole line at a time (``VerdictSink``). Readers take a folder's verdicts
from ``verdict_files`` (verdicts.jsonl, then the shards in order), so that every command
reads a sharded run as it reads a local one.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NotRequired

from typing_extensions import TypedDict

from kgcheck.arguments import Arg, ArgumentMessage, literal
from kgcheck.data import safe_json
from kgcheck.data.atomic import write_text_atomic
from kgcheck.data.cells import neutralise, restore
from kgcheck.data.datasets import load_facts
from kgcheck.data.facts import Fact
from kgcheck.data.input_uri import is_input_uri, local_copy
from kgcheck.data.labels import LabelsError
from kgcheck.data.run_errors import RunError, RunFolderError
from kgcheck.data.shard_store import ShardStore, shard_name
from kgcheck.data.triples import read_triples
from kgcheck.data.upstream import as_source
from kgcheck.data.verdict_schema import shape_problem

__all__ = [
    "CORRECTION_DECISIONS", "ESTIMATE", "LABELS_FILE", "LABEL_COLUMNS", "LEGACY_LABEL_COLUMNS",
    "LOCK", "RESUME_INDEX", "REVIEW_DB", "RUN_INFO", "SHARDS", "SHARD_PLAN", "SUMMARY",
    "VERDICTS", "VERDICT_LABELS", "LabelRow", "LabelsError", "RunError", "RunFolderError",
    "VerdictSink", "VerdictsView", "amend_summary", "annotator_label_files",
    "checked_facts",
    "exclusive", "labels_file_name", "labels_text", "make_folder", "parse_only", "read_labels",
    "problem_note", "read_run_info", "read_summary", "read_verdict", "read_verdict_at",
    "has_verdicts", "read_verdicts", "record_problem", "scan_folder", "scan_verdicts",
    "shard_name", "shard_store_uri",
    "shard_done_path", "shard_verdicts_path", "short_repr", "verdict_files", "verdict_lines",
    "verdict_paths",
    "verdicts_location", "verdicts_stamp", "write_json",
    "write_labels",
]

VERDICTS = "verdicts.jsonl"
SUMMARY = "summary.json"
RUN_INFO = "run.json"
LABELS_FILE = "labels.csv"
ESTIMATE = "estimate.json"
REVIEW_DB = "review.sqlite"
LOCK = ".lock"
RESUME_INDEX = ".resume-index.sqlite"
# A sharded run's folder of verdict files, and the plan of its shards in it.
SHARDS = "shards"
SHARD_PLAN = "plan.json"
# What a verdict record's ``label`` may be.
VERDICT_LABELS = ("T", "F", "NA", "NEI")
# labels.csv: one row per reviewed fact; ``label`` is T, F or skip; ``design`` says how the
# fact came to be reviewed (``REVIEW_DESIGNS``), which decides what the labels can estimate;
# ``annotator`` names the person whose queue it is (``kgcheck review --annotator``; empty:
# the run's one review); ``correction`` is what the person did with the model's suggested
# correction (accept, edit, reject or empty) and ``corrected_value`` the value accepted
# (the suggestion's, or the person's edit).
LABEL_COLUMNS = ("fact_id", "label", "note", "reviewer", "reviewed_at", "design", "annotator",
                 "correction", "corrected_value")
# Files written before the design column (and the later ones) were added: read as of an
# unknown design, no named annotator and no correction decisions.
OLD_LABEL_COLUMNS = LABEL_COLUMNS[:5]
# Files written before the annotator column was added.
LEGACY_LABEL_COLUMNS = LABEL_COLUMNS[:6]
# Files written before the correction columns were added.
ANNOTATED_LABEL_COLUMNS = LABEL_COLUMNS[:7]
# How a review queue chose its facts: a seeded random sample of every verdict, every verdict
# in the run's order, or the verdicts matching ``--only`` (``filtered:F,NA``).
REVIEW_DESIGNS = ("srs", "queue", "filtered")
REVIEW_LABELS = ("T", "F", "skip")
CORRECTION_DECISIONS = ("accept", "edit", "reject")

Warn = Callable[[str], None]


def short_repr(value: Any, limit: int = 60) -> str:
    """Return ``repr(value)`` cut to ``limit`` characters, for messages."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def record_problem(record: Any) -> str | None:
    """Say why a verdicts.jsonl record cannot be used (None: it can)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    fact_id = record.get("fact_id")
    if not isinstance(fact_id, str | int) or isinstance(fact_id, bool) or str(fact_id) == "":
        return "no fact_id"
    if "label" not in record:
        return "no label"
    if record["label"] not in VERDICT_LABELS:
        return f"label {short_repr(record['label'])} is not T, F, NA or NEI"
    return None


# One line of a verdicts file: (line number, byte offset, byte length, record or None,
# why it is not a verdict or None).
VerdictLine = tuple[int, int, int, dict[str, Any] | None, str | None]


def _refused(path: Path, n: int, record: dict[str, Any], line: bytes) -> None:
    """Refuse a verdict record of another shape, naming its file and line."""
    problem = shape_problem(record)
    if problem is None and (b"\\ud" in line or b"\\uD" in line):
        # A lone surrogate escape parses as JSON but is no text: no file can hold it.
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            problem = "holds a lone surrogate escape (\\ud800-\\udfff alone is no text)"
    if problem is not None:
        raise RunFolderError(f"{path}, line {n}: the verdict of fact "
                             f"{short_repr(str(record['fact_id']))} is malformed: {problem}; "
                             "correct or remove that line")


def verdict_lines(path: Path, *, checked: bool = False) -> Iterator[VerdictLine]:
    """Read a verdicts file as a stream: every non-blank line, as a record or a problem.

    The one parser of verdicts.jsonl: a line that is not a verdict (a torn last line from
    a crash, ``{}``, a record without ``label``) comes with the reason instead of a record.
    ``checked``: a verdict of another shape (``details`` a list, ``seconds`` a string, see
    ``kgcheck.data.verdict_schema``) is refused, by a ``RunFolderError`` naming its line;
    every reader that shows or exports records reads them so.
    """
    if not path.exists():
        return
    offset = 0
    with path.open("rb") as fh:
        for n, line in enumerate(fh, start=1):
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                # Bytes that are not UTF-8 are replaced, not a reason to drop the verdict.
                record = safe_json.parse(line.decode("utf-8", errors="replace"))
            except json.JSONDecodeError:
                yield n, start, len(line), None, "incomplete or malformed JSON"
                continue
            problem = record_problem(record)
            if checked and problem is None:
                _refused(path, n, record, line)
            yield n, start, len(line), None if problem else record, problem


def problem_note(path: Path, problems: Sequence[str]) -> str:
    """Say, in one line, which lines of a verdicts file were ignored and why."""
    shown = "; ".join(problems[:5]) + ("; ..." if len(problems) > 5 else "")
    return (f"{path}: ignored {len(problems)} line(s) that are not verdicts ({shown}); "
            "those facts keep their last good verdict or run again")


def shard_verdicts_path(folder: Path, index: int) -> Path:
    """Return the verdict file of shard ``index`` of a sharded run (``shards/00007.jsonl``)."""
    return Path(folder) / SHARDS / shard_name(index, ".jsonl")


def shard_done_path(folder: Path, index: int) -> Path:
    """Return the marker a finished shard leaves (``shards/00007.done``, its summary figures)."""
    return Path(folder) / SHARDS / shard_name(index, ".done")


def shard_store_uri(folder: Path) -> str | None:
    """Return the remote store a sharded run's plan names (None: its shards are local)."""
    try:
        plan = safe_json.parse((Path(folder) / SHARDS / SHARD_PLAN).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    store = plan.get("store") if isinstance(plan, dict) else None
    return store if isinstance(store, str) and store else None


def _remote_store(folder: Path) -> ShardStore | None:
    """Return the remote store a sharded run's shards are at (None: they are local)."""
    uri = shard_store_uri(folder)
    return None if uri is None else ShardStore(uri)


def verdict_files(folder: Path) -> list[Path]:
    """Return the verdict files of a run folder, in order: verdicts.jsonl, then the shards.

    The one place that knows where a folder keeps its verdicts: a local run has
    ``verdicts.jsonl``, a sharded run ``shards/NNNNN.jsonl`` (in shard order, which is the
    input's order). A sharded run whose shards are at a URI (``--shards-uri``) has the
    files that changed there copied into ``shards/`` first (``ShardStore.pull``).
    """
    folder = Path(folder)
    files = [folder / VERDICTS] if (folder / VERDICTS).is_file() else []
    shards = folder / SHARDS
    if shards.is_dir():
        store = _remote_store(folder)
        if store is not None:
            return files + store.pull(shards)
        numbered = [(int(p.stem), p) for p in shards.glob("*.jsonl")
                    if p.stem.isdigit() and p.is_file()]
        files += [p for _, p in sorted(numbered)]
    return files


def verdict_paths(path: Path) -> list[Path]:
    """Return the verdict files a path stands for: a run folder's, or the one file given."""
    return verdict_files(path) if Path(path).is_dir() else [Path(path)]


def verdicts_location(folder: Path) -> str:
    """Return where a run folder keeps its verdicts, to show: verdicts.jsonl, shards/ or a URI."""
    folder = Path(folder)
    store = _remote_store(folder)
    if store is not None:
        return str(store.shown)
    return str(folder / SHARDS if (folder / SHARDS).is_dir() else folder / VERDICTS)


def has_verdicts(folder: Path) -> bool:
    """Tell whether a run folder has any verdict file (the run has started)."""
    store = _remote_store(folder)
    if store is not None:  # asked of the store: nothing is copied to answer
        return (Path(folder) / VERDICTS).is_file() or any(
            name.endswith(".jsonl") for name in store.names())
    return bool(verdict_files(folder))


def read_verdicts(path: Path, warn: Warn | None = None, *,
                  checked: bool = True) -> dict[str, dict[str, Any]]:
    """Read a verdicts file, or every verdict file of a run folder: last valid record per fact.

    A line that is not a verdict is skipped, so it never replaces a good verdict; ``warn``
    hears of such lines once per file, with their line numbers. A verdict of another shape
    is refused (``verdict_lines``' ``checked``) unless ``checked`` is off. This holds every
    record in memory: a whole KG's run is read with ``VerdictsView`` or ``scan_folder``
    instead.

    Raises:
        RunFolderError: (``checked``) a verdict record of another shape, naming its line.

    """
    records: dict[str, dict[str, Any]] = {}
    for file in verdict_paths(path):
        problems: list[str] = []
        for n, _, _, record, problem in verdict_lines(file, checked=checked):
            if record is None:
                problems.append(f"line {n}: {problem}")
            else:
                records[str(record["fact_id"])] = record
        if problems and warn is not None:
            warn(problem_note(file, problems))
    return records


def read_verdict(folder: Path, fact_id: str) -> dict[str, Any]:
    """Return the verdict a run folder holds for one fact (its last valid record).

    Raises:
        RunFolderError: not a run folder, or no verdict of that fact (naming a few it has).

    """
    read_run_info(folder)
    records = read_verdicts(folder)
    if str(fact_id) not in records:
        some = ", ".join(list(records)[:5]) or "none"
        raise RunFolderError(f"{folder}: no verdict of fact {fact_id!r} (it has {len(records):,}"
                             f" verdicts, e.g. {some})")
    return records[str(fact_id)]


def scan_verdicts(path: Path) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Yield ``(byte offset, byte length, record)`` for every usable line of a verdicts file.

    Lines that are not verdicts are skipped as ``read_verdicts`` skips them; a fact may
    appear more than once (the last one counts), so an index keeps the last offset per fact.
    """
    for _, offset, length, record, _ in verdict_lines(path):
        if record is not None:
            yield offset, length, record


def scan_folder(folder: Path) -> Iterator[tuple[Path, int, int, dict[str, Any]]]:
    """Yield ``(file, byte offset, byte length, record)`` for every usable line of a folder.

    ``scan_verdicts`` over each of ``verdict_files(folder)`` in turn; the last record of a
    fact counts.
    """
    for path in verdict_files(folder):
        for offset, length, record in scan_verdicts(path):
            yield path, offset, length, record


def read_verdict_at(path: Path, offset: int, length: int) -> dict[str, Any]:
    """Read the one verdict record stored at ``offset`` (from ``scan_verdicts``)."""
    with path.open("rb") as fh:
        fh.seek(offset)
        line = fh.read(length)
    try:
        record = safe_json.parse(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RunFolderError(f"{path}: no verdict at byte {offset} (was the file replaced "
                             "since it was indexed?)") from None
    problem = record_problem(record) or shape_problem(record)
    if problem is not None:
        raise RunFolderError(f"{path}: no verdict at byte {offset} ({problem})")
    return record


def verdicts_stamp(folder: Path) -> tuple[int, int]:
    """Return (size, mtime in ns) of a folder's verdicts: an index is stale once they move.

    Sizes are summed and the latest time taken over ``verdict_files``.
    """
    size = mtime = 0
    for path in verdict_files(folder):
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        size += stat.st_size
        mtime = max(mtime, stat.st_mtime_ns)
    return (size, mtime)


def parse_only(only: str | Sequence[str] | None, choices: Sequence[str] = VERDICT_LABELS, *,
               what: str = "verdict", error: type[Exception] = RunFolderError
               ) -> tuple[str, ...]:
    """Read ``--only`` (``"F,NA"`` or a sequence of words) into the ``choices`` it names.

    The one ``--only`` parser (export, review): words are matched case-insensitively and
    returned in the choices' spelling, in the order given, each once; nothing given (None,
    ``""``, ``[]``) is no filter, ``()``. An unknown word raises ``error`` naming it, as a
    ``what``, and the choices.
    """
    if only is None:
        return ()
    items = only.split(",") if isinstance(only, str) else [str(item) for item in only]
    words = list(dict.fromkeys(item.strip() for item in items if item.strip()))
    spelling = {choice.lower(): choice for choice in choices}
    unknown = [word for word in words if word.lower() not in spelling]
    if unknown:
        message = (f"{{only}}: unknown {what} {literal(', '.join(unknown))}; use any of "
                   f"{', '.join(choices)}")
        if issubclass(error, ArgumentMessage):
            raise error(message, only=Arg("only", words))
        raise error(message.format(only=f"only={words!r}"))
    return tuple(dict.fromkeys(spelling[word.lower()] for word in words))


def read_run_info(folder: Path, error: type[Exception] = RunFolderError) -> dict[str, Any]:
    """Read a run folder's ``run.json``; ``error`` names what is missing or malformed."""
    if not folder.is_dir():
        raise error(f"{folder}: run folder not found")
    info_path = folder / RUN_INFO
    if not info_path.is_file():
        raise error(f"{folder} is not a kgcheck run folder (no {RUN_INFO})")
    try:
        info = safe_json.parse(info_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{info_path}: malformed JSON: {getattr(exc, 'msg', exc)}") from None
    if not isinstance(info, dict):
        raise error(f"{info_path}: not a JSON object")
    return info


def read_summary(folder: Path) -> dict[str, Any] | None:
    """Read ``summary.json`` (None when absent or torn by a crash: the verdicts count)."""
    path = folder / SUMMARY
    if not path.is_file():
        return None
    try:
        summary = safe_json.parse(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return summary if isinstance(summary, dict) else None


def write_json(path: Path, value: Any) -> None:
    """Replace a JSON file of the folder atomically (``indent=1``, one trailing newline)."""
    write_text_atomic(path, safe_json.dumps(value, indent=1) + "\n")


def amend_summary(out_dir: Path, fields: Mapping[str, Any]) -> None:
    """Add ``fields`` to a finished run's summary.json (what the runner cannot know)."""
    folder = Path(out_dir)
    write_json(folder / SUMMARY, {**(read_summary(folder) or {}), **fields})


def make_folder(out_dir: Path) -> None:
    """Create the run folder (and its parents); a clear ``RunError`` when it cannot be."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RunError(f"{literal(str(out_dir))} exists and is not a folder; pick another {{out}}",
                       out=Arg("out")) from None
    except OSError as exc:
        raise RunError(f"cannot create the run folder {literal(str(out_dir))}: "
                       f"{literal(str(exc.strerror or exc))}; pick another {{out}}",
                       out=Arg("out")) from None


@contextmanager
def exclusive(out_dir: Path) -> Iterator[None]:
    """Hold the run folder's lock, so that two runs never write one folder at once."""
    make_folder(out_dir)
    with (out_dir / LOCK).open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunError(f"another kgcheck run is writing to {literal(str(out_dir))}; wait for "
                           "it to end or pick another {out}", out=Arg("out")) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class VerdictSink:
    """Append verdict lines to a file, each line whole or not at all.

    A write that fails part way (disk full, file too large) is cut back off, so the file
    never holds a torn line that a later append would glue onto.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record as a JSON line; on OSError the file is left as it was."""
        data = memoryview((safe_json.dumps(record) + "\n").encode("utf-8"))
        size = os.fstat(self.fd).st_size
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            with suppress(OSError):
                os.ftruncate(self.fd, size)
            raise

    def close(self) -> None:
        """Close the file."""
        os.close(self.fd)


class VerdictsView(Sequence[dict[str, Any]]):
    """The records of a verdicts file (or of a run folder's verdict files), read when asked.

    What a run hands back as its records: iterating streams the files (flat in memory for
    a whole KG's run); ``len`` counts their records once; indexing reads them all into
    memory on first use (for small runs and tests). The records are taken as one per fact,
    as a run leaves them.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._count: int | None = None
        self._loaded: list[dict[str, Any]] | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._loaded is not None:
            yield from self._loaded
            return
        for path in verdict_paths(self.path):
            for _, _, record in scan_verdicts(path):
                yield record

    def __len__(self) -> int:
        if self._count is None:
            self._count = sum(1 for path in verdict_paths(self.path) for _ in scan_verdicts(path))
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if self._loaded is None:
            self._loaded = list(self)
        return self._loaded[index]

    def __repr__(self) -> str:
        return f"VerdictsView({str(self.path)!r})"


def checked_facts(run_dir: Path, info: Mapping[str, Any], data: str | Path | None = None,
                  error: type[Exception] = RunFolderError) -> list[Fact]:
    """Load the facts a run checked (its verdicts hold ids and terms, not whole facts).

    A run's ``source`` is its triples file or data folder. Facts a script passed in memory
    are looked up in ``data`` (or the default data) under the run's dataset name: they are
    usually a slice of ``kgcheck.load_dataset``.
    """
    source = str(info.get("source") or "")
    dataset = str(info.get("dataset") or "")
    try:
        if is_input_uri(source):
            # A sharded run's input at a URL: read from a copy, as a local file is read.
            with local_copy(source) as path:
                return read_triples(path, dataset)
        if source and Path(source).is_file():
            return read_triples(source, dataset)
        folder = data or (None if source in ("", "memory") or not Path(source).exists()
                          else source)
        return load_facts(dataset, as_source(folder))
    except (OSError, ValueError) as exc:
        where = ("the run's facts were given in memory" if source in ("", "memory")
                 else f"cannot load the facts the run checked from {source}")
        raise error(f"{run_dir}: {where} ({exc}); run them from a dataset or a triples "
                    "file") from None


class LabelRow(TypedDict):
    """One decision, as ``labels.csv`` keeps it."""

    fact_id: str
    label: str
    note: str
    reviewer: str
    reviewed_at: str
    design: str
    annotator: str
    correction: NotRequired[str]
    corrected_value: NotRequired[str]


def labels_file_name(annotator: str | None = None) -> str:
    """Return the labels file of an annotator's review: ``labels-<name>.csv`` (None: labels.csv).

    The name is kept to letters, digits, ``.``, ``_`` and ``-`` so that it is a safe file name.
    """
    if not annotator:
        return LABELS_FILE
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", annotator).strip(".-")
    if not slug:
        raise LabelsError(f"annotator name {annotator!r} has no letter or digit")
    return f"labels-{slug}.csv"


def annotator_label_files(folder: Path) -> list[Path]:
    """Return the annotators' labels files of a run folder (``labels-<name>.csv``), sorted."""
    return sorted(p for p in Path(folder).glob("labels-*.csv") if p.is_file())


def read_labels(path: str | Path, run_fact_ids: Collection[str] | None = None
                ) -> dict[str, LabelRow]:
    """Read a labels file, by fact id; with ``run_fact_ids``, refuse labels of other facts.

    Raises:
        LabelsError: the header or a row is malformed, a fact is labelled twice, or (given
            ``run_fact_ids``) the file labels facts that the run did not check.

    """
    path = Path(path)
    if not path.is_file():
        raise LabelsError(f"{path}: labels file not found")
    rows: dict[str, LabelRow] = {}
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            header = tuple(reader.fieldnames or ())
            if header not in (LABEL_COLUMNS, ANNOTATED_LABEL_COLUMNS, LEGACY_LABEL_COLUMNS,
                              OLD_LABEL_COLUMNS):
                raise LabelsError(f"{path}: expected the columns {','.join(LABEL_COLUMNS)}, "
                                  f"found {','.join(header) or 'none'}")
            for n, raw in enumerate(reader, start=2):
                row = LabelRow(**{  # type: ignore[typeddict-item]
                    k: restore(raw.get(k) or "").strip() for k in LABEL_COLUMNS})
                if not row["fact_id"]:
                    raise LabelsError(f"{path}, row {n}: no fact_id")
                if row["label"] not in REVIEW_LABELS:
                    raise LabelsError(f"{path}, row {n}: label {row['label']!r} is not one of "
                                      f"{', '.join(REVIEW_LABELS)}")
                if row["correction"] not in ("", *CORRECTION_DECISIONS):
                    raise LabelsError(f"{path}, row {n}: correction {row['correction']!r} is "
                                      f"not one of {', '.join(CORRECTION_DECISIONS)} or empty")
                if row["fact_id"] in rows:
                    raise LabelsError(f"{path}, row {n}: fact {row['fact_id']} is labelled "
                                      "twice")
                rows[row["fact_id"]] = row
    except (UnicodeDecodeError, csv.Error) as exc:
        raise LabelsError(f"{path}: cannot be read as CSV ({exc})") from None
    if run_fact_ids is not None:
        foreign = [fid for fid in rows if fid not in run_fact_ids]
        if foreign:
            raise LabelsError(
                f"{path} labels {len(foreign)} facts this run did not check (e.g. "
                f"{', '.join(foreign[:3])}): it belongs to another run; move it away or "
                "review the run it came from")
    return rows


def labels_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """Render rows as the CSV text of a labels file (header included)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=LABEL_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        # Notes are free text a spreadsheet would run as formulas (see ``cells``).
        writer.writerow({k: neutralise(row.get(k) or "") for k in LABEL_COLUMNS})
    return out.getvalue()


def write_labels(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace the labels file atomically and durably: a crash leaves the old or the new."""
    write_text_atomic(path, labels_text(rows))
