"""Tuning records: one JSON line per measured candidate (the `measurements -> records` arrow of
autotune/).

    {"version": 1, "target": "c", "task": {template, op, inputs, attrs}, "config": {knob: value},
     "result": {"costs": [seconds, ...]} or {"error": kind, "message": text},
     "build_s": 0.21, "run_s": 0.05, "timestamp": 1717171717.0}

Files are append-only.  Each line is written with one write, flushed and fsync'ed, so a run
that is killed leaves every earlier line intact and at most one partial last line; loading
skips a line that does not parse (with a warning naming the file and line), and a writer that
reopens such a file starts on a new line so the partial one stays isolated.  A line that parses
but is not a record (not a JSON object, a cost that is not a positive finite number) is skipped
too: all the skipped lines of a file are reported in one warning that counts them.  A run resumes
from a file by skipping the (task, config) pairs in `measured_keys`; `best_configs` picks, per
task, the record with the lowest time (its fastest repeat: see measure.MeasureResult.cost),
among the task's confirmation records ("stage": "confirm", tuner.confirm) when it has any.
"""
from __future__ import annotations

import json
import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from ..te.space import config_key
from .task import Task

VERSION = 1


@dataclass(frozen=True)
class Record:
    """One measured candidate: its task (with target), config and result."""

    task: Task
    config: dict
    costs: tuple = ()              # seconds per repeat; empty when error is set
    error: str | None = None       # error kind (see measure.ErrorKind) or None
    message: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    timestamp: float = 0.0
    version: int = VERSION
    stage: str = "tune"            # "confirm": re-measured side by side (tuner.confirm); "model": in the
                                   # model's fused kernels (model_confirm.py)
    threads: int | None = None     # threads the candidate ran with (None: not recorded)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.costs)

    @property
    def cost(self) -> float:
        """Seconds per run: the fastest repeat (infinity for an error)."""
        return min(self.costs) if self.ok else math.inf

    def measured_with(self, threads: int | None) -> bool:
        """Whether this record counts for a run with `threads` threads: it was measured with
        that many, or one side does not say (None)."""
        return threads is None or self.threads is None or self.threads == threads

    @property
    def key(self) -> tuple[str, str]:
        """(task key, config key): what a resumed run skips."""
        return self.task.key, config_key(self.config)

    def to_json(self) -> dict:
        result = {"costs": list(self.costs)} if self.error is None else {"error": self.error,
                                                                         "message": self.message}
        d = {"version": self.version, "target": self.task.target, "task": self.task.workload_json(),
             "config": self.config, "result": result, "build_s": round(self.build_s, 6),
             "run_s": round(self.run_s, 6), "timestamp": self.timestamp}
        if self.stage != "tune":
            d["stage"] = self.stage
        if self.threads is not None:
            d["threads"] = self.threads
        return d

    def to_line(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @staticmethod
    def from_json(d: dict) -> "Record":
        if not isinstance(d, dict):
            raise ValueError(f"a record is a JSON object, not {type(d).__name__}")
        if d.get("version") != VERSION:
            raise ValueError(f"record version {d.get('version')!r} is not {VERSION}")
        task = Task.from_json({**d["task"], "target": d["target"]})
        result = d["result"]
        if not isinstance(result, dict):
            raise ValueError("record result is not a JSON object")
        if not isinstance(d["config"], dict):
            raise ValueError("record config is not a JSON object")
        stage = str(d.get("stage", "tune"))
        threads = None if d.get("threads") is None else int(d["threads"])
        if "error" in result:
            return Record(task, d["config"], (), str(result["error"]), str(result.get("message", "")),
                          float(d.get("build_s", 0)), float(d.get("run_s", 0)), float(d.get("timestamp", 0)),
                          stage=stage, threads=threads)
        costs = tuple(float(c) for c in result["costs"])
        if not costs or not all(math.isfinite(c) and c > 0 for c in costs):
            raise ValueError(f"record costs {list(costs)} are not positive finite seconds")
        return Record(task, d["config"], costs, None, "",
                      float(d.get("build_s", 0)), float(d.get("run_s", 0)), float(d.get("timestamp", 0)),
                      stage=stage, threads=threads)


class RecordWriter:
    """Appends records to a JSON-lines file, one flushed and fsync'ed line each."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab")
        if self._file.tell() > 0 and not _ends_with_newline(self.path):
            self._write(b"\n")      # isolate a partial line left by a killed run

    def write(self, record: Record) -> None:
        self._write(record.to_line().encode("utf-8") + b"\n")

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def iter_records(path: str | os.PathLike) -> Iterator[Record]:
    """The records of a file in order; lines that are not records (a partial last line from a
    killed run, a record of another version, a JSON value that is not a record) are skipped,
    with one warning at the end that counts them and names the first."""
    path = Path(path)
    if not path.exists():
        return
    skipped, first = 0, ""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line:
                continue
            try:
                record = Record.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as err:
                if not skipped:
                    what = ("a partial line (a run was killed while writing it?)" if not raw.endswith(b"\n")
                            else "a bad record")
                    first = f"{path}:{lineno}: {what}: {err}"
                skipped += 1
                continue
            yield record
    if skipped:
        warnings.warn(f"skipped {skipped} line(s) of {path} that are not valid records (first: {first})",
                      RuntimeWarning, stacklevel=2)


def load_records(path: str | os.PathLike) -> list[Record]:
    return list(iter_records(path))


def _records(source: str | os.PathLike | Iterable[Record]) -> Iterable[Record]:
    return iter_records(source) if isinstance(source, (str, os.PathLike)) else source


def best_configs(source: str | os.PathLike | Iterable[Record], target: str | None = None,
                 threads: int | None = None) -> dict[str, Record]:
    """{task key: the record with the lowest time} over the successful records of a file
    (or an iterable of records), optionally only those of `target`.  Where a task has
    records of a confirmation (configs re-measured side by side, stage "confirm"), only those
    compete: times taken at one moment are compared, not a quiet moment's with a busy one's.
    Records of a confirmation in the model (stage "model", model_confirm.py: times of the
    task's fused kernels as the model runs them) take precedence over both.
    With `threads`, only records measured with that many threads (or with no count recorded)
    count: the best schedule for one thread is often not the best for two (1-thread records
    applied at 2 threads made tuned models slower than their defaults)."""
    from ..target import Target

    want = None if target is None else str(Target.parse(target))
    tables: dict[str, dict[str, Record]] = {"tune": {}, "confirm": {}, "model": {}}
    for r in _records(source):
        if not r.ok or (want is not None and r.task.target != want):
            continue
        if not r.measured_with(threads):
            continue
        table = tables.get(r.stage, tables["tune"])
        old = table.get(r.task.key)
        if old is None or r.cost < old.cost:
            table[r.task.key] = r
    best = tables["tune"]
    best.update(tables["confirm"])
    best.update(tables["model"])
    return best


def measured_keys(source: str | os.PathLike | Iterable[Record]) -> set[tuple[str, str]]:
    """{(task key, config key)} of every record, errors included: a resumed run measures none
    of them again."""
    return {r.key for r in _records(source)}


def now() -> float:
    return time.time()
