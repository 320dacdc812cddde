"""Run a zoo: the config's models over a process pool (or Ray), resumable, then the manifest.

:func:`run_zoo` lists the config's models (:func:`compiler.zoo.config.jobs`), skips those with
a record in ``DIR/records`` (a rerun into the same directory resumes), schedules the rest on
an existing engine -- a ``concurrent.futures`` process pool (spawned workers, one thread each,
recycled every :data:`TASKS_PER_WORKER` models so memory stays flat) or, with ``ray``, a Ray
cluster -- and rebuilds ``manifest.jsonl`` from the records, in the config's order.  Every
model's bytes depend on its own seed only, so the worker count, the engine and the order of
completion cannot change them; the manifest holds no timing (``timings.jsonl`` does).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from verify.progress import Progress

from ..automata.atomic import TEMP_SUFFIX, write_atomic
from ..automata.errors import InputError
from ..automata.load import SPEC_MAX_BYTES
from ..automata.reading import MiB, read_json
from .config import Config, Job, job_sha256, jobs, load
from .job import CIRCUITS, MODELS, RECORDS, TRACES, run_job, sha256_file

MANIFEST_SCHEMA = "shortcut-zoo-manifest/1"
PARQUET = "manifest.parquet"
"""The manifest's Parquet copy beside ``manifest.jsonl`` (written when pyarrow is installed)."""
MAX_WORKERS = 64
TASKS_PER_WORKER = 100
"""A pool worker is replaced after this many models (bounded memory over thousands)."""
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Every worker computes with one thread: the same arithmetic (and bytes) on any machine load."""
IN_FLIGHT_PER_WORKER = 4
"""Jobs handed to the engine ahead of the free workers (the rest wait in the parent)."""


@dataclass
class ZooSummary:
    """What a run produced: counts by status, class and method, failures by reason."""

    out: str
    total: int
    new: int
    resumed: int
    remade: int = 0
    """Records found but not reused (made for another job, malformed, or their files missing or changed)."""
    by_status: dict[str, int] = field(default_factory=dict)
    by_class: dict[str, int] = field(default_factory=dict)
    by_method: dict[str, int] = field(default_factory=dict)
    by_verification: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)

    def text(self) -> str:
        """The summary as a few lines."""
        fmt = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"  # noqa: E731
        remade = f", {self.remade} of them made again: their records or files were missing, changed or made " \
                 f"for another config" if self.remade else ""
        return (f"zoo: {self.total} models in {self.out} ({self.new} made now{remade}, {self.resumed} already there)\n"
                f"  status: {fmt(self.by_status)}\n  by class: {fmt(self.by_class)}\n"
                f"  by method: {fmt(self.by_method)}\n  verification: {fmt(self.by_verification)}\n"
                f"  failures by reason: {fmt(self.failures)}")


RECORD_MAX_BYTES = SPEC_MAX_BYTES + MiB
"""Largest record (or ``zoo.json``) read back: a record holds its model's spec."""
STATUSES = ("ok", "not_exact", "failed")


def _read_json(path: Path) -> Any:
    """A zoo file the tool wrote, read within the bounds of :mod:`compiler.automata.reading`;
    None when it is missing or unreadable (a record is then made again)."""
    try:
        return read_json(path, RECORD_MAX_BYTES, "zoo file", InputError)
    except InputError:
        return None


def _no_links(out: Path) -> None:
    """Refuse a zoo directory whose subdirectories or files are symbolic links: the zoo writes
    them itself, and a planted link would send its writes elsewhere (docs/zoo.md).  The directory
    itself may be a link: the user named it."""
    for sub in ("", MODELS, CIRCUITS, TRACES, RECORDS):
        d = out / sub
        links = [d] if sub and d.is_symlink() else [e for e in os.scandir(d) if e.is_symlink()] if d.is_dir() else []
        if links:
            raise InputError(f"{str(Path(links[0]))!r} in the zoo directory is a symbolic link: the zoo writes its "
                             f"files itself and does not follow links; remove it")


def _prepare(out: Path, config: Config) -> None:
    """Create the directory tree (refusing symbolic links in it, :func:`_no_links`), refuse one
    that holds another config's zoo, and remove the temporary files a killed run may have left
    (``.NAME.XXXXXXXX.tmp``)."""
    out.mkdir(parents=True, exist_ok=True)
    _no_links(out)
    for sub in (MODELS, CIRCUITS, TRACES, RECORDS):
        (out / sub).mkdir(exist_ok=True)
    stamp = out / "zoo.json"
    if stamp.exists():
        old = _read_json(stamp)
        if not isinstance(old, dict) or old.get("config_sha256") != config.digest():
            raise InputError(f"{str(out)!r} holds a zoo made from another config; choose a new directory")
    write_atomic(stamp, json.dumps({"schema": MANIFEST_SCHEMA, "config_sha256": config.digest(),
                                    "seed": config.seed}, sort_keys=True) + "\n")
    for sub in ("", MODELS, CIRCUITS, TRACES, RECORDS):
        for tmp in (out / sub).glob(f".*{TEMP_SUFFIX}"):
            tmp.unlink(missing_ok=True)


def _files_intact(out: Path, row: dict[str, Any]) -> bool:
    """A finished model's files are all there, regular files, with the sha256 its record holds."""
    files, digests = row.get("files"), row.get("sha256")
    if not (isinstance(files, dict) and isinstance(digests, dict) and files and set(files) == set(digests)):
        return False
    for key, rel in files.items():
        path = out / rel if isinstance(rel, str) else None
        if path is None or path.parent.parent != out or path.is_symlink() or not path.is_file():
            return False
        if sha256_file(path) != digests[key]:
            return False
    return True


def _row_ok(row: Any, job: Job) -> bool:
    """A record's row has the shape :func:`compiler.zoo.job.run_job` writes, for ``job``."""
    if not (isinstance(row, dict) and row.get("id") == job.id and type(row.get("seed")) is int
            and row.get("seed") == job.seed and row.get("class") == job.family.kind
            and row.get("family") == job.family.name and row.get("status") in STATUSES):
        return False
    error = row.get("error")
    if error is not None and not (isinstance(error, dict) and isinstance(error.get("kind"), str)):
        return False
    if row["status"] == "failed":
        return error is not None
    return (isinstance(row.get("method"), str) and isinstance(row.get("verification"), dict)
            and isinstance(row["verification"].get("how"), str))


def _record(out: Path, job: Job) -> dict[str, Any] | None:
    """The finished record of ``job``: None when there is none, or it is unreadable, made for
    another job (:func:`compiler.zoo.config.job_sha256`: another seed or family settings), of
    another shape, or its model's files are missing or changed -- the model is made again."""
    record = _read_json(out / RECORDS / f"{job.id}.json")
    if not (isinstance(record, dict) and record.get("job_sha256") == job_sha256(job)
            and isinstance(record.get("timings"), dict) and _row_ok(record.get("row"), job)):
        return None
    if record["row"]["status"] != "failed" and not _files_intact(out, record["row"]):
        return None
    return record


@contextmanager
def _thread_env() -> Iterator[None]:
    """:data:`THREAD_ENV` in the environment the workers inherit (restored afterwards)."""
    before = {k: os.environ.get(k) for k in THREAD_ENV}
    os.environ.update(THREAD_ENV)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _pool(todo: list[Job], out: Path, workers: int, done: Callable[[dict[str, Any]], None]) -> None:
    """Run ``todo`` on a process pool of ``workers`` spawned processes, at most a few ahead."""
    context = multiprocessing.get_context("spawn")
    with _thread_env(), ProcessPoolExecutor(workers, mp_context=context, max_tasks_per_child=TASKS_PER_WORKER) as pool:
        queue, running = list(reversed(todo)), set[Future]()
        while queue or running:
            while queue and len(running) < workers * IN_FLIGHT_PER_WORKER:
                running.add(pool.submit(run_job, queue.pop(), str(out)))
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                done(f.result())


def _ray(todo: list[Job], out: Path, workers: int, address: str, done: Callable[[dict[str, Any]], None]) -> None:
    """Run ``todo`` on Ray: a local cluster of ``workers`` CPUs (``address`` empty) or the
    cluster at ``address``; Ray schedules, this only hands it the same per-model function."""
    try:
        import ray  # noqa: PLC0415 - the optional [ray] extra, loaded only for --ray
    except ImportError:
        raise InputError("--ray needs the ray extra: pip install -e '.[ray]'") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address or None, num_cpus=None if address else workers, include_dashboard=False,
                 log_to_driver=False, runtime_env={"env_vars": THREAD_ENV})
    try:
        remote = ray.remote(num_cpus=1)(run_job)
        queue, running = list(reversed(todo)), list[Any]()
        while queue or running:
            while queue and len(running) < workers * IN_FLIGHT_PER_WORKER:
                running.append(remote.remote(queue.pop(), str(out)))
            finished, running = ray.wait(running, num_returns=1)
            done(ray.get(finished[0]))
    finally:
        if started:
            ray.shutdown()


def _json_line(x: Any) -> str:
    """One manifest value or row as compact, key-sorted JSON text (deterministic bytes)."""
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def manifest_parquet(rows: list[dict[str, Any]]) -> bytes | None:
    """The manifest as Parquet bytes (``DIR/manifest.parquet``), or None without the optional
    ``pyarrow`` (the ``[zoo]`` extra).  One column per field, sorted by name as the JSON rows'
    keys; objects (``error``, ``basis``, ``files``, ``sha256``, ``verification``) are their
    JSON text, lists and scalars native, a field a row lacks is null."""
    try:
        import pyarrow as pa  # noqa: PLC0415 - the optional [zoo] extra
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError:
        return None
    names = sorted({k for r in rows for k in r})
    cell = lambda v: _json_line(v) if isinstance(v, dict) else v  # noqa: E731
    table = pa.table({k: pa.array([cell(r.get(k)) for r in rows]) for k in names})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def _manifest(out: Path, all_jobs: list[Job], found: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rebuild ``manifest.jsonl`` (and its Parquet copy, :func:`manifest_parquet`) and
    ``timings.jsonl`` from the records (``found``: by id, those checked on resume and those made
    now), in the config's order."""
    records = [found.get(j.id) for j in all_jobs]
    rows = [{"schema": MANIFEST_SCHEMA, **r["row"]} for r in records if r is not None]
    line = _json_line
    write_atomic(out / "manifest.jsonl", "".join(line(r) + "\n" for r in rows))
    parquet = manifest_parquet(rows)
    if parquet is None:  # without pyarrow: no copy, and none left from an earlier run to disagree
        (out / PARQUET).unlink(missing_ok=True)
    else:
        write_atomic(out / PARQUET, parquet)
    write_atomic(out / "timings.jsonl", "".join(line({"id": r["row"]["id"], **r["timings"]}) + "\n"
                                                for r in records if r is not None))
    return rows


def _summary(out: Path, rows: list[dict[str, Any]], new: int, remade: int) -> ZooSummary:
    """Counts of the manifest's rows."""
    s = ZooSummary(str(out), len(rows), new, len(rows) - new, remade)
    s.by_status = dict(Counter(r["status"] for r in rows))
    s.by_class = dict(Counter(r["class"] for r in rows))
    s.by_method = dict(Counter(r["method"] for r in rows if "method" in r))
    s.by_verification = dict(Counter(r["verification"]["how"] for r in rows if "verification" in r))
    s.failures = dict(Counter(r["error"]["kind"] for r in rows if r.get("error")))
    return s


def run_zoo(config: "Config | str | Path", out: "str | Path", *, workers: int = 1, limit: int | None = None,
            ray: str | None = None, progress: Callable[[str, int, int], None] | None = None) -> ZooSummary:
    """Make (or finish) the zoo of ``config`` in ``out``; see the module docstring.  ``limit``:
    the config's first ``limit`` models only; ``ray``: run on Ray (``""``: a local cluster of
    ``workers`` CPUs; otherwise a cluster address); ``progress(what, done, total)``."""
    if not isinstance(config, Config):
        config = load(config)
    if type(workers) is not int or not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"workers must be an integer from 1 to {MAX_WORKERS}, got {workers!r}")
    out = Path(out)
    _prepare(out, config)
    all_jobs = jobs(config, limit)
    found = {j.id: r for j in all_jobs if (r := _record(out, j)) is not None}
    todo = [j for j in all_jobs if j.id not in found]
    remade = sum((out / RECORDS / f"{j.id}.json").exists() for j in todo)
    count = [len(found)]

    def done(record: dict[str, Any]) -> None:
        found[record["row"]["id"]] = record
        count[0] += 1
        if progress:
            progress(record["row"]["id"], count[0], len(all_jobs))

    if todo and ray is not None:
        _ray(todo, out, workers, ray, done)
    elif todo:
        _pool(todo, out, workers, done)
    return _summary(out, _manifest(out, all_jobs, found), len(todo), remade)


def zoo_progress() -> Progress:
    """Models made of planned on stderr, with an ETA (as ``verify``'s progress)."""
    return Progress(sys.stderr, what="zoo", unit="models")
