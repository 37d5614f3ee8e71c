"""Checkpoints of long runs: finished tasks kept next to the output, so an interrupted run can resume.

``<output>.partial/`` holds ``fingerprint.json`` (what was being run, with which code) and one
``.npz`` file per write of finished tasks (the runner writes every few seconds, see
:data:`ldpsim.running.runner.CHECKPOINT_SECONDS`; named after its first task), each written to a
temporary name, flushed to the disk and renamed, so a file there is complete. Each file holds
the SHA-256 digest of its arrays, and its arrays are checked against the variables the run declares
when it is read: one that fails (a disk that lied, a copy cut short, values rewritten since) is
never trusted: it is removed, its tasks run again, and a warning says how many. A run with
``resume`` loads the tasks of a checkpoint with the same fingerprint and runs the others; the
checkpoint is removed once the results file is written.

The folder is ldpsim's only if it is one: a file or a symbolic link by that name is refused, and
only the files ldpsim writes there are ever removed from it. Nothing in it is opened unless it is a
regular file (a FIFO would block the run for ever).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import warnings
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base.atomic import atomic_path, remove_stale_in
from ..base.errors import LdpsimError
from ..base.untrusted import open_regular
from ..model.domains import Product
from ..model.variables import DOMAIN
from ..results.assemble import Layout, columns, stack_values
from ..results.io import write_error
from ..results.variables import PRIVACY_LEVELS
from .provenance import code_identity, setups_of, used_plugins
from .tasks import TaskResult

if TYPE_CHECKING:
    from .scenario import Scenario

MANIFEST = "fingerprint.json"
_KEY = "__key__"  # the task's grid key, stored beside its variables (not a variable name: those are identifiers)
_KEYS = "__keys__"  # a batch's keys, one row per task; variables stacked over the tasks ("i/name" for one task's)
_DIGEST = "__sha256__"  # the SHA-256 digest of the file's other arrays, as written (see _digest)
#: the names of the files ldpsim writes in a checkpoint folder (temporaries: see ldpsim.base.atomic), the only
#: ones it ever removes from there
_OURS = (MANIFEST, "task-*.npz", f".{MANIFEST}.*.tmp", ".task-*.npz.*.npz")

#: a variable's dtype and the shape of one task's value (None: a size the layout does not give)
Expected = Mapping[str, tuple[np.dtype, tuple[int | None, ...]]]


class CheckpointWarning(UserWarning):
    """Files of a checkpoint that could not be trusted: their tasks run again."""


class _Untrusted(Exception):
    """A checkpoint file that cannot be trusted; ``runs``: how many tasks it says it holds (None: unreadable)."""

    def __init__(self, runs: int | None = None) -> None:
        super().__init__(runs)
        self.runs = runs


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
    folder = checkpoint_dir(output)
    if folder.is_symlink() or not folder.is_dir():
        return 0  # not a checkpoint (refused when a run opens it)
    count = 0
    for file in sorted(folder.glob("task-*.npz")):
        try:
            count += len(_read(file))
        except _Untrusted:
            continue
    return count


def _name(key: tuple[int, ...]) -> str:
    return "task-" + "-".join(str(int(k)) for k in key) + ".npz"


def _digest(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """The SHA-256 digest of a file's arrays (names, dtypes, shapes and values), as 32 bytes."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        if name == _DIGEST:
            continue
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(array.tobytes())
    return np.frombuffer(digest.digest(), dtype=np.uint8)


def expected_values(layout: Layout) -> dict[str, tuple[np.dtype, tuple[int | None, ...]]]:
    """Each declared variable's dtype and the shape of one task's value, as a task of ``layout`` gives it.

    The sizes of dimensions other than the domain's, the estimators', the metrics', the rounds' and the cohorts'
    (a plugin's own) are None: only their number is known.
    """
    sizes: dict[str, int] = {DOMAIN: layout.domain.size, "privacy_level": len(PRIVACY_LEVELS)}
    if layout.cohorts:
        sizes["cohort"] = len(layout.cohorts)
    if isinstance(layout.domain, Product):
        sizes["attribute"] = len(layout.domain.names)
    expected = {}
    for var in layout.variables:
        try:
            dtype = np.dtype(var.dtype)
        except TypeError:
            continue
        rounds = (layout.rounds,) if layout.rounds and var.per_round else ()
        expected[var.name] = (dtype, (*layout.lead(var), *rounds, *(sizes.get(d) for d in var.item_dims)))
    return expected


def _fits(array: np.ndarray, name: str, expected: Expected | None, stacked: int | None = None) -> bool:
    """Whether ``array`` is what a task gives of variable ``name`` (``stacked``: that many tasks' values)."""
    if expected is None or name not in expected:
        return True  # nothing declared to check against
    dtype, shape = expected[name]
    if stacked is not None:
        if array.ndim == 0 or array.shape[0] != stacked:
            return False
        found = array.shape[1:]
    else:
        found = array.shape
    return (
        array.dtype == dtype
        and len(found) == len(shape)
        and all(want is None or have == want for have, want in zip(found, shape))
    )


def _read(file: Path, expected: Expected | None = None) -> list[TaskResult]:
    """The tasks of one checkpoint file.

    Raises
    ------
    _Untrusted
        If it cannot be trusted: not a regular file, unreadable, its digest not that of its arrays, not the
        tasks its name says, or (given ``expected``, see :func:`expected_values`) arrays no task would give.
    """
    handle = open_regular(file, follow_links=False)
    if handle is None:
        raise _Untrusted()
    try:
        with handle, np.load(handle, allow_pickle=False) as data:
            arrays = {member: data[member] for member in data.files}
        batch = _KEYS in arrays
        keys = [tuple(int(k) for k in row) for row in arrays[_KEYS]] if batch else [tuple(int(k) for k in arrays[_KEY])]
    except (OSError, ValueError, KeyError, IndexError, EOFError, TypeError, zipfile.BadZipFile, zlib.error):
        raise _Untrusted() from None  # truncated or corrupt: its tasks run again, and the file is replaced
    stored = arrays.pop(_DIGEST, None)
    if stored is None or not np.array_equal(stored, _digest(arrays)):
        raise _Untrusted(len(keys))  # altered since it was written (or damaged where the zip's checks miss it)
    if not keys or _name(keys[0]) != file.name:
        raise _Untrusted(len(keys))  # not the tasks its name says
    values: list[dict[str, np.ndarray]] = [{} for _ in keys]
    try:
        for member, array in arrays.items():
            if member in (_KEY, _KEYS):
                continue
            if not batch:
                values[0][member] = array
                if not _fits(array, member, expected):
                    raise _Untrusted(len(keys))
            elif "/" in member:  # one run's value
                index, name = member.split("/", 1)
                if not 0 <= int(index) < len(keys):
                    raise _Untrusted(len(keys))
                values[int(index)][name] = array
                if not _fits(array, name, expected):
                    raise _Untrusted(len(keys))
            else:  # stacked over the batch
                if not _fits(array, member, expected, stacked=len(keys)) or array.ndim == 0 or len(array) != len(keys):
                    raise _Untrusted(len(keys))
                for i in range(len(keys)):
                    values[i][member] = array[i]
    except (ValueError, IndexError):  # a member named "i/name" whose i is not a run of the batch
        raise _Untrusted(len(keys)) from None
    return [TaskResult(key, vals) for key, vals in zip(keys, values)]


def _check_folder(path: Path) -> None:
    """Refuse a checkpoint path that is not a folder ldpsim could have made: a symbolic link, a file."""
    if path.is_symlink():
        raise LdpsimError(
            f"'{path}' is a symbolic link, not the folder where ldpsim keeps a run's finished tasks",
            field="output",
            hint="remove the link (ldpsim removes nothing it did not write), or write to another output",
        )
    if path.exists() and not path.is_dir():
        raise LdpsimError(
            f"'{path}' is not a folder: ldpsim keeps a run's finished tasks in a folder of that name",
            field="output",
            hint="remove or rename that file, or write to another output",
        )


def _remove_ours(folder: Path) -> None:
    """Remove the files ldpsim writes from ``folder``, then the folder if nothing else is left in it."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in _OURS):
            try:
                entry.unlink()  # a link, or a FIFO: only the name goes
            except OSError:
                continue  # a folder by one of those names, or no permission: left as it is
    try:
        folder.rmdir()
    except OSError:
        pass  # something else in it: not ours to remove


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
        _check_folder(self.path)
        if self.path.exists() and not resume and not len(self):
            _remove_ours(self.path)  # a run stopped before any task finished: nothing to keep
            if self.path.exists():
                raise LdpsimError(
                    f"'{self.path}' holds files ldpsim did not write",
                    field="output",
                    hint="move them away, or write to another output",
                )
        if self.path.exists():
            if not resume:
                raise LdpsimError(
                    f"'{self.path}' holds the finished runs of an interrupted run",
                    field="--resume",
                    hint="add --resume to continue it, or remove that folder to start over",
                )
            handle = open_regular(manifest, follow_links=False)
            if handle is None and (manifest.exists() or manifest.is_symlink()):
                raise LdpsimError(
                    f"'{manifest}' is not a regular file: not a checkpoint ldpsim wrote",
                    field="--resume",
                    hint="remove that folder, or drop --resume and write to another output",
                )
            found_fingerprint, found_code = None, None  # no manifest, or not one ldpsim wrote
            if handle is not None:
                try:
                    with handle:
                        found = json.loads(handle.read())
                    found_fingerprint, found_code = found["fingerprint"], found.get("code")
                except (OSError, ValueError, KeyError, TypeError, AttributeError):
                    pass
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

    def load(self, layout: Layout | None = None) -> dict[tuple[int, ...], TaskResult]:
        """The finished tasks, by key.

        A file that cannot be trusted (see :func:`_read`; with ``layout``, arrays are checked against the
        variables it declares too) is removed, so its tasks run again; a :class:`CheckpointWarning` says how
        many.
        """
        expected = expected_values(layout) if layout is not None else None
        done = {}
        files, runs, unknown = 0, 0, False
        for file in sorted(self.path.glob("task-*.npz")):
            try:
                results = _read(file, expected)
            except _Untrusted as untrusted:
                files, runs, unknown = files + 1, runs + (untrusted.runs or 0), unknown or untrusted.runs is None
                try:
                    file.unlink()  # replaced by the tasks' new file (which may be named after another task)
                except OSError:
                    pass
                continue
            for result in results:
                done[result.key] = result
        if files:
            held = "it" if files == 1 else "them"
            again = (
                f"the runs in {held} run again"
                if unknown
                else f"the {runs} finished run{'' if runs == 1 else 's'} in {held} {'runs' if runs == 1 else 'run'} again"
            )
            warnings.warn(
                CheckpointWarning(
                    f"{files} file{'' if files == 1 else 's'} of the checkpoint '{self.path}' could not be trusted"
                    f" (damaged, or altered since written): {again}"
                ),
                stacklevel=2,
            )
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
            arrays[_DIGEST] = _digest(arrays)  # checked when read: a file altered since is not trusted
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
        """Remove the checkpoint: the files ldpsim wrote, and the folder if nothing else is in it."""
        self._pending = ()
        if not self.path.is_symlink() and self.path.is_dir():
            _remove_ours(self.path)

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
