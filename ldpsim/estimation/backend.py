"""Where the estimation passes run: the array module (numpy, CuPy, PyTorch), its device and its precision.

A :class:`Backend` is chosen once per run (the scenario's ``backend`` field, ``ldpsim run --backend``,
``Estimator.estimate(observations, backend=...)``) and every pass of GIBU, SQUAREM and the Newton solver's
products over the likelihood runs on it (:mod:`~ldpsim.estimation.device`). Everything else stays on the CPU
in numpy: the scenario engine, observations, results and checkpoints; estimates come back as numpy arrays.

The numpy backend is the code path ldpsim always had, operation for operation, so its results are bit for
bit those of earlier versions. Any other array module goes through the Python array API standard
(``array_api_compat`` wraps CuPy and PyTorch; ``array_api_strict`` tests the same code on the CPU): the
same lines run with every module, so a line that assumes numpy's semantics fails on the CPU first.

Asking for a GPU where none is usable is a one-line :class:`~ldpsim.base.errors.ParameterError` naming the
fix, never a silent run on the CPU; only ``"auto"`` falls back to numpy, as it says.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.errors import ParameterError

#: the array modules a scenario or the command line may name
BACKENDS = ("numpy", "cupy", "torch", "auto")
#: the precisions of the passes: float64 (the certificate's), or float32 for two-valued likelihoods (their 0/1
#: pattern is exact in it). Not bfloat16: a bf16 product rounds theta and its result to 8 bits, too coarse for EM
PRECISIONS = ("float64", "float32")
#: (backend, precision) of ldpsim's own numpy path, the default
NATIVE = ("numpy", "float64")
_FIX = 'install ldpsim[gpu] on a machine with an NVIDIA GPU and its driver, or use backend = "numpy"'


@dataclass(frozen=True, eq=False)
class Backend:
    """An array module, the device its arrays live on, and the precision of the passes.

    Parameters
    ----------
    name
        "numpy", "cupy", "torch", or another array module's name (tests: "array_api_strict").
    xp
        The array namespace (Python array API standard; numpy itself for "numpy").
    device
        The device arrays are created on (None: the module's default).
    precision
        "float64" (default), or "float32" for the 0/1 pattern of a two-valued likelihood (its
        entries are exact there; products accumulate in float32, then float64; see docs/guide/gpu.md).
    """

    name: str
    xp: Any
    device: Any = None
    precision: str = "float64"

    @property
    def native(self) -> bool:
        """Whether this is ldpsim's own numpy path (bit for bit the results of earlier versions); any other backend,
        numpy in float32 or ``from_namespace`` of numpy included, runs the array API path."""
        return self.xp is np and self.name == "numpy" and self.precision == "float64"

    @property
    def dtype(self) -> Any:
        """The float64 dtype of this module: vectors, sums and certificates are always float64."""
        return self.xp.float64

    @property
    def pattern_dtype(self) -> Any:
        """The dtype a two-valued likelihood's 0/1 pattern is stored in, and its products accumulate in."""
        return self.xp.float32 if self.precision == "float32" else self.xp.float64

    def to_device(self, array: Any, dtype: Any = None) -> Any:
        """``array`` (numpy or a sequence) as this module's array on its device: float64 (int64 for integers), or
        ``dtype``."""
        host = np.asarray(array)
        host = np.ascontiguousarray(host, dtype=np.int64 if host.dtype.kind in "iu" else np.float64)
        if self.native:
            return host if dtype is None else host.astype(dtype)
        if self.name == "torch":
            out = _torch().from_numpy(host).to(self.device)
        else:
            out = self.xp.asarray(host) if self.device is None else self.xp.asarray(host, device=self.device)
        return out if dtype is None else self.xp.astype(out, dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        """A device array back in host memory, as a numpy array."""
        if isinstance(array, np.ndarray):
            return array
        if self.name == "cupy":
            return np.asarray(array.get())
        if self.name == "torch":
            return np.asarray(array.detach().cpu().numpy())
        return np.from_dlpack(array)

    def free_bytes(self) -> float | None:
        """Free memory on the device (None on the CPU: the memory guard of ``ldpsim.base.memory`` applies)."""
        if self.name == "cupy":
            return float(_cupy().cuda.Device().mem_info[0])
        if self._torch_gpu:
            return float(_torch().cuda.mem_get_info(self.device)[0])
        return None

    def synchronize(self) -> None:
        """Wait for the device's queued work (for timing); nothing on the CPU."""
        if self.name == "cupy":
            _cupy().cuda.Device().synchronize()
        elif self._torch_gpu:
            _torch().cuda.synchronize()

    @property
    def _torch_gpu(self) -> bool:
        return self.name == "torch" and str(self.device).startswith("cuda")

    def __repr__(self) -> str:
        return f"Backend({self.name!r}, device={self.device!r}, precision={self.precision!r})"


NUMPY = Backend("numpy", np)
_ACTIVE: ContextVar[Backend] = ContextVar("ldpsim_backend", default=NUMPY)
_RESOLVED: dict[tuple[str, str], Backend] = {}


def resolve_backend(name: str = "numpy", precision: str = "float64") -> Backend:
    """The backend of this name and precision, checked to be usable here (cached).

    Parameters
    ----------
    name
        "numpy" (default), "cupy", "torch" (a CUDA GPU), or "auto" (CuPy, then PyTorch, where a GPU is
        usable; numpy otherwise).
    precision
        "float64" (default) or "float32" (two-valued likelihoods: see :class:`Backend`).

    Returns
    -------
    Backend
        The backend.

    Raises
    ------
    ParameterError
        An unknown name or precision, or a GPU module that is not installed or finds no usable GPU.
    """
    if name not in BACKENDS:
        raise ParameterError(f"unknown backend {name!r}", field="backend", hint=f"use one of {', '.join(BACKENDS)}")
    if precision not in PRECISIONS:
        raise ParameterError(
            f"unknown precision {precision!r}", field="precision", hint=f"use one of {', '.join(PRECISIONS)}"
        )
    key = (name, precision)
    if key not in _RESOLVED:
        if name == "auto":
            found = _gpu("cupy", precision, quiet=True) or _gpu("torch", precision, quiet=True)
            backend = found or (_numpy(precision))
        elif name == "numpy":
            backend = _numpy(precision)
        else:
            backend = _gpu(name, precision)  # type: ignore[assignment]
        _RESOLVED[key] = backend
    return _RESOLVED[key]


def from_namespace(xp: Any, precision: str = "float64", device: Any = None) -> Backend:
    """A backend for any array API namespace (``array_api_strict``, a wrapped numpy): the generic code path.

    Parameters
    ----------
    xp
        The namespace.
    precision
        As in :func:`resolve_backend`.
    device
        The device arrays are created on (None: the module's default).

    Returns
    -------
    Backend
        A backend that runs the array API code path even for numpy (``xp`` a wrapper of it).
    """
    if precision not in PRECISIONS:
        raise ParameterError(
            f"unknown precision {precision!r}", field="precision", hint=f"use one of {', '.join(PRECISIONS)}"
        )
    name = getattr(xp, "__name__", type(xp).__name__).split(".")[-1]
    return Backend("numpy-array-api" if name == "numpy" else name, xp, device, precision)


def _numpy(precision: str) -> Backend:
    # float32 passes are the array API path on numpy itself (numpy 2 implements the standard)
    return NUMPY if precision == "float64" else Backend("numpy", np, None, precision)


def _gpu(name: str, precision: str, quiet: bool = False) -> Backend | None:
    """The GPU backend ``name``, or None (``quiet``) / a ParameterError where it is not usable."""
    try:
        module, compat = (_cupy(), _compat_cupy()) if name == "cupy" else (_torch(), _compat_torch())
    except ImportError as exc:
        if quiet:
            return None
        raise ParameterError(
            f"{name!r} needs {exc.name or name}, which is not installed", field="backend", hint=_FIX
        ) from None
    try:
        if name == "cupy":
            usable = module.cuda.runtime.getDeviceCount() > 0
            device = None
        else:
            usable = bool(module.cuda.is_available())
            device = module.device("cuda") if usable else None
    except Exception:  # a CUDA runtime without a driver raises its own errors
        usable, device = False, None
    if not usable:
        if quiet:
            return None
        raise ParameterError(f"{name!r} finds no usable GPU here", field="backend", hint=_FIX)
    return Backend(name, compat, device, precision)


def as_backend(backend: Backend | str | None) -> Backend:
    """``backend`` itself, the named one (:func:`resolve_backend`), or for None the active one
    (:func:`using_backend`; numpy outside it)."""
    if backend is None:
        return _ACTIVE.get()
    if isinstance(backend, Backend):
        return backend
    return resolve_backend(backend)


@contextlib.contextmanager
def using_backend(backend: Backend | str | None) -> Iterator[Backend]:
    """Run the estimation passes inside the ``with`` block on ``backend`` (None: leave the active one).

    Parameters
    ----------
    backend
        A :class:`Backend`, a name for :func:`resolve_backend`, or None.

    Yields
    ------
    Backend
        The active backend.
    """
    if backend is None:
        yield _ACTIVE.get()
        return
    chosen = as_backend(backend)
    token = _ACTIVE.set(chosen)
    try:
        yield chosen
    finally:
        _ACTIVE.reset(token)


# The GPU modules, imported where a backend needs them (none is a dependency; mypy may not find them)
def _cupy() -> Any:
    import cupy  # type: ignore[import-not-found, unused-ignore]

    return cupy


def _torch() -> Any:
    import torch  # type: ignore[import-not-found, unused-ignore]

    return torch


def _compat_cupy() -> Any:
    import array_api_compat.cupy  # type: ignore[import-not-found, unused-ignore]

    return array_api_compat.cupy


def _compat_torch() -> Any:
    import array_api_compat.torch  # type: ignore[import-not-found, unused-ignore]

    return array_api_compat.torch
