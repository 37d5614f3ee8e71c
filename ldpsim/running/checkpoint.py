"""Checkpoints of long runs: finished tasks kept next to the output, so an interrupted run can resume.

``<output>.partial/`` holds ``fingerprint.json`` (what was being run, with which code) and one
``.npz`` file per write of finished tasks (the runner writes every few seconds, see
:data:`ldpsim.running.runner.CHECKPOINT_SECONDS`; named after its first task), each written to a
temporary name, flushed to the disk and renamed, so a file there is complete; one that is not
(a disk that lied, a copy cut short) is ignored and its tasks run again. A run with ``resume`` loads the tasks of a
checkpoint with the same fingerprint and runs the others; the checkpoint is
removed once the results file is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base.atomic import atomic_path, remove_stale_in
from ..base.errors import LdpsimError
from ..results.assemble import columns, stack_values
from ..results.io import write_error
from .provenance import code_identity, setups_of, used_plugins
from .tasks import TaskResult

if TYPE_CHECKING:
    from .scenario import Scenario

MANIFEST = "fingerprint.json"
_KEY = "__key__"  # the task's grid key, stored beside its variables (not a variable name: those are identifiers)
_KEYS = "__keys__"  # a batch's keys, one row per task; variables stacked over the tasks ("i/name" for one task's)


def fingerprint(scenario: Scenario, code: dict[str, Any] | None = None) -> str:
    """A digest of everything a task's result depends on: the resolved scenario, its seed, the overrides, the code.

    ``code`` is :func:`ldpsim.running.provenance.code_identity` of the scenario's plugins (computed if not
    given): versions, and a digest of the source files, so an uncommitted edit counts too.
    """
    if code is None:
        code = code_identity(used_plugins(setups_of(scenario)).values())
    text = json.dumps(
        {
            "scenario": scenario.resolved_json(),
            "axes": [[a.name, list(a.paths), repr(a.values)] for a in scenario.axes],
            "seed": scenario.seed,
            "repetitions": scenario.repetitions,
            "overrides": list(scenario.overrides),
            "code": code,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def checkpoint_dir(output: str | os.PathLike) -> Path:
    output = Path(output)
    return output.with_name(output.name + ".partial")


def finished_tasks(output: str | os.PathLike) -> int:
    """How many finished tasks the checkpoint of ``output`` holds (0 if there is none)."""
    return sum(len(_read(file) or ()) for file in sorted(checkpoint_dir(output).glob("task-*.npz")))


def _name(key: tuple[int, ...]) -> str:
    return "task-" + "-".join(str(int(k)) for k in key) + ".npz"


def _read(file: Path) -> list[TaskResult] | None:
    """The tasks of one checkpoint file, or None if it cannot be trusted (unreadable, or not what its name says)."""
    try:
        with np.load(file, allow_pickle=False) as data:
            if _KEYS in data.files:
                keys = [tuple(int(k) for k in row) for row in data[_KEYS]]
                values: list[dict[str, np.ndarray]] = [{} for _ in keys]
                for member in data.files:
                    if member == _KEYS:
                        continue
                    if "/" in member:  # one run's value
                        index, name = member.split("/", 1)
                        values[int(index)][name] = data[member]
                    else:  # stacked over the batch
                        stacked = data[member]
                        if stacked.shape[0] != len(keys):
                            return None
                        for i in range(len(keys)):
                            values[i][member] = stacked[i]
            else:
                keys = [tuple(int(k) for k in data[_KEY])]
                values = [{name: data[name] for name in data.files if name != _KEY}]
    except (OSError, ValueError, KeyError, IndexError, EOFError, TypeError, zipfile.BadZipFile, zlib.error):
        return None  # truncated or corrupt: its tasks run again, and the file is replaced
    if not keys or _name(keys[0]) != file.name:
        return None  # not the tasks its name says
    return [TaskResult(key, vals) for key, vals in zip(keys, values)]


class Checkpoint:
    """The finished tasks of one run of one scenario, saved next to its output."""

    def __init__(self, output: str | os.PathLike, scenario: Scenario, *, resume: bool = False):
        """Open the checkpoint of ``output``.

        Without ``resume`` an existing checkpoint is refused (it may hold hours of work); with it, a checkpoint
        of another scenario is refused, and a missing one means nothing is finished yet.
        """
        self.path = checkpoint_dir(output)
        self._pending: Sequence[TaskResult] = ()  # see defer
        code = code_identity(used_plugins(setups_of(scenario)).values())
        #: the code identity the run started with (its results record it too: the code its tasks ran)
        self.code = code
        self.fingerprint = fingerprint(scenario, code)
        manifest = self.path / MANIFEST
        if self.path.exists() and not resume and not len(self):
            shutil.rmtree(self.path)  # a run stopped before any task finished: nothing to keep
        if self.path.exists():
            if not resume:
                raise LdpsimError(
                    f"'{self.path}' holds the finished runs of an interrupted run",
                    field="--resume",
                    hint="add --resume to continue it, or remove that folder to start over",
                )
            try:
                found = json.loads(manifest.read_text())
                found_fingerprint, found_code = found["fingerprint"], found.get("code")
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                found_fingerprint, found_code = None, None
            if found_fingerprint != self.fingerprint:
                changed = _code_changes(found_code, code) if isinstance(found_code, dict) else []
                what = (
                    f"was made by other code ({'; '.join(changed)})"
                    if changed
                    else "belongs to a different scenario (or overrides, or code)"
                )
                raise LdpsimError(
                    f"the checkpoint '{self.path}' {what}",
                    field="--resume",
                    hint="remove that folder, or drop --resume and write to another output",
                )
            remove_stale_in(self.path)  # of task files whose writing was killed
        #: the folder and its manifest, made with the first task file (:meth:`save`): a run that writes its
        #: results sooner (one shorter than CHECKPOINT_SECONDS) leaves no trace, and pays no fsync for it
        self._manifest: bytes | None = (
            None
            if self.path.exists()
            else json.dumps(
                {"fingerprint": self.fingerprint, "scenario": scenario.name, "code": code}, indent=1
            ).encode()
        )

    def _file(self, key: tuple[int, ...]) -> Path:
        return self.path / _name(key)

    def load(self) -> dict[tuple[int, ...], TaskResult]:
        """The finished tasks, by key (a file that cannot be read is ignored: its tasks run again)."""
        done = {}
        for file in sorted(self.path.glob("task-*.npz")):
            for result in _read(file) or ():
                done[result.key] = result
        return done

    def save(self, results: TaskResult | Sequence[TaskResult]) -> None:
        """Keep finished tasks, one file per call (atomically: a reader never sees half a file)."""
        batch = [results] if isinstance(results, TaskResult) else results
        if not len(batch):
            return
        first = batch[0]
        arrays: dict[str, Any] = {}
        cols = columns(batch) if len(batch) > 1 else None
        if len(batch) == 1:
            arrays = {name: np.asarray(value) for name, value in first.values.items()}
            arrays[_KEY] = np.asarray(first.key, dtype=np.int64)
        elif cols is not None:  # held column by column already (batches sent back by workers)
            arrays = {**cols.values, _KEYS: np.asarray(cols.keys, dtype=np.int64)}
        else:  # one array per variable, stacked over the batch (a zip member per array is what costs)
            names = dict.fromkeys(name for result in batch for name in result.values)
            for name in names:
                stacked = stack_values(batch, name)  # np.stack's array, made in C
                if stacked is not None:
                    arrays[name] = stacked
                    continue
                values = [result.values.get(name) for result in batch]
                shapes = {None if v is None else np.shape(v) for v in values}
                if len(shapes) == 1 and None not in shapes:
                    arrays[name] = np.stack([np.asarray(v) for v in values])
                else:  # absent from some runs (an optional variable), or shaped differently: one per run
                    arrays.update({f"{i}/{name}": np.asarray(v) for i, v in enumerate(values) if v is not None})
            arrays[_KEYS] = np.asarray([r.key for r in batch], dtype=np.int64)
        target = self._file(first.key)
        try:
            if self._manifest is not None:  # the first write: the folder and what it holds first
                self.path.mkdir(exist_ok=True)
                _write_atomic(self.path / MANIFEST, self._manifest)
                self._manifest = None
            with atomic_path(target, suffix=".npz", clean=False) as tmp:  # cleaned at open
                np.savez(tmp, **arrays)
        except OSError as exc:  # a full disk: the run stops with one line, keeping the tasks saved so far
            raise write_error(target, exc) from None

    def defer(self, results: Sequence[TaskResult]) -> None:
        """Hold finished tasks to :meth:`flush` should the run fail before its results are written.

        The runner writes every ``CHECKPOINT_SECONDS``; the tasks finished since its last write are
        deferred rather than written at the end: a run that goes on to write its results (and remove
        the checkpoint) then pays no write and ``fsync`` for them (a tenth of a second-long sweep's
        wall time), and one that fails meanwhile (a full disk at the results' write) flushes them.
        """
        self._pending = results

    def flush(self) -> None:
        """Write the tasks held by :meth:`defer`, if any (see :meth:`save`)."""
        pending, self._pending = self._pending, ()
        self.save(pending)

    def remove(self) -> None:
        self._pending = ()
        shutil.rmtree(self.path, ignore_errors=True)

    def __len__(self) -> int:
        """Checkpoint files (each holding one or more finished tasks)."""
        return sum(1 for _ in self.path.glob("task-*.npz"))


def _code_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two code identities, in words (empty if they agree)."""
    changes = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if key == "code_sha256":
            changes.append("source files edited")
        elif key == "distributions" and isinstance(before, dict) and isinstance(after, dict):
            for name in sorted(set(before) | set(after)):
                if before.get(name) != after.get(name):
                    changes.append(f"{name} {before.get(name)} -> {after.get(name)}")
        else:
            changes.append(f"{key} {before} -> {after}")
    return changes


def _write_atomic(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
