"""A likelihood's passes on a :class:`~ldpsim.estimation.backend.Backend`'s device.

:func:`on_device` moves what the passes read to the device once per likelihood (the observations' counts and
the operator: a dense ``H``, a two-valued operator's 0/1 pattern, a convolution's spectrum), and
:class:`DeviceLikelihood` gives GIBU and SQUAREM (:func:`~ldpsim.estimation.engine.gibu`) the same
methods as :class:`~ldpsim.estimation.engine.Likelihood` (``em_parts``, ``certificate``, ``n``, ``size``)
on device vectors, and the Newton solver (:mod:`~ldpsim.estimation.interior_point`) its products on host
vectors. Everything is written against the Python array API standard: numpy, CuPy, PyTorch and
``array_api_strict`` run the same lines.

How each operator is held:

- a dense ``H``: itself, in float64;
- an operator that reads its rows and whose entries take two values ``r < 1`` and 1 (unary encodings,
  local hashing, subset selection: ``ldpsim.with_min_entry`` and ``ldpsim.with_exact_rows``): its 0/1
  pattern ``B``, read in blocks of rows, with ``H = r + s B`` (``s = 1 - r`` up to rounding), in the backend's pattern dtype
  (float64, or float32 where exact for the pattern; its products then accumulate in float32);
- a convolution (:class:`~ldpsim.estimation.convolution.ConvolutionOperator`): its kernel's spectrum, FFT
  products on the device, and the operator's accuracy guard (entries recomputed exactly on the host);
- any other operator: products on the host (vectors cross per pass; the reports stay on the host).
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from ..base.errors import ParameterError
from ..base.memory import require_memory
from .backend import Backend

#: entries of ``H`` read per block when a row-reading operator is moved to the device
BLOCK_ENTRIES = 1 << 24

_COPIES: weakref.WeakKeyDictionary[Any, dict[Backend, DeviceLikelihood]] = weakref.WeakKeyDictionary()


def on_device(likelihood: Any, backend: Backend) -> DeviceLikelihood:
    """The device copy of ``likelihood`` on ``backend``, made once and kept as long as the likelihood lives.

    Parameters
    ----------
    likelihood
        The :class:`~ldpsim.estimation.engine.Likelihood` (its reports stay on the host), typed loosely: the
        engine imports this module.
    backend
        A backend other than ldpsim's native numpy path.

    Returns
    -------
    DeviceLikelihood
        Its passes on the device.
    """
    copies = _COPIES.setdefault(likelihood, {})
    if backend not in copies:
        copies[backend] = DeviceLikelihood(likelihood, backend)
    return copies[backend]


class DeviceLikelihood:
    """A :class:`~ldpsim.estimation.engine.Likelihood`'s passes on a device: ``em_parts`` and ``certificate`` take
    device vectors (as GIBU runs there), ``matvec``/``rmatvec``/``gram`` host ones (the Newton solver's products).
    """

    def __init__(self, likelihood: Any, backend: Backend):
        self.backend = backend
        xp = backend.xp
        self.n, self.size, self.constant = likelihood.n, likelihood.size, likelihood.constant
        self.counts = backend.to_device(likelihood.counts)
        self._host: Any = None  # the host operator, for the products without a device form
        self._dense: Any = None
        self._pattern: Any = None
        self._r = self._span = 0.0  # a two-valued likelihood's entries: r, and r + span
        self._convolution: Any = None
        H = likelihood.H
        device_form = getattr(H, "on_device", None)
        if isinstance(H, np.ndarray):
            self._hold_dense(H)
        elif callable(device_form):
            self._convolution = device_form(backend)
        elif callable(getattr(H, "rows", None)) and getattr(H, "min_entry", 0.0) > 0:
            self._hold_rows(H)
        else:
            self._host = H
        if backend.precision != "float64" and self._pattern is None:
            raise ParameterError(
                f"float32 passes need a two-valued likelihood (a 0/1 pattern), not {type(H).__name__}",
                field="precision",
                hint='use precision = "float64" for this mechanism',
            )
        self._ones = xp.ones(self.size, dtype=xp.float64, **self._device())

    def _device(self) -> dict[str, Any]:
        return {} if self.backend.device is None else {"device": self.backend.device}

    def _check_memory(self, entries: int, itemsize: int, what: str) -> None:
        free = self.backend.free_bytes()
        need = float(entries) * itemsize
        if free is None:
            require_memory(need, what, hint="use fewer distinct reports, or the numpy backend's structured passes")
        elif need > 0.9 * free:
            raise ParameterError(
                f"{what} takes {need / 2**30:.1f} GiB, the device has {free / 2**30:.1f} GiB free",
                field="backend",
                hint='use precision = "float32" (two-valued likelihoods), fewer distinct reports, or backend = "numpy"',
            )

    def _hold_dense(self, H: np.ndarray) -> None:
        low = float(H.min()) if H.size else 0.0
        span = _span(H, low)
        if span is not None and self.backend.precision != "float64":
            self._r, self._span = low, span
            self._check_memory(H.size, 4, f"the {H.shape[0]} x {H.shape[1]} pattern on {self.backend.name}")
            self._pattern = self.backend.to_device(H != low, self.backend.pattern_dtype)
        else:
            self._check_memory(H.size, 8, f"the {H.shape[0]} x {H.shape[1]} likelihood on {self.backend.name}")
            self._dense = self.backend.to_device(H)

    def _hold_rows(self, H: Any) -> None:
        """Read the operator's rows in blocks: its 0/1 pattern where its entries take two values, ``min_entry`` and
        one other (1, up to rounding), else its dense rows."""
        xp, rows, size = self.backend.xp, H.shape[0], H.shape[1]
        r = float(H.min_entry)
        step = max(1, BLOCK_ENTRIES // max(1, size))
        itemsize = 4 if self.backend.precision == "float32" else 8
        self._check_memory(rows * size, itemsize, f"the {rows} x {size} likelihood on {self.backend.name}")
        blocks: list[Any] = []
        span: float | None = None
        pattern = True
        for lo in range(0, rows, step):
            block = np.asarray(H.rows(np.arange(lo, min(rows, lo + step))), dtype=float)
            found = _span(block, r)
            if found is None or (span and found and found != span):  # 0.0: a block of r alone says nothing
                pattern = False
                break
            span = span or found
            blocks.append(self.backend.to_device(block != r, self.backend.pattern_dtype))
        if pattern:
            self._r, self._span = r, span if span else 1.0 - r
            self._pattern = xp.concat(blocks, axis=0) if len(blocks) > 1 else blocks[0]
            return
        self._dense = xp.concat(
            [
                self.backend.to_device(np.asarray(H.rows(np.arange(lo, min(rows, lo + step))), dtype=float))
                for lo in range(0, rows, step)
            ],
            axis=0,
        )

    # ------------------------------------------------------------- device products
    def matvec(self, theta: Any) -> Any:
        """``H @ theta`` for a device vector."""
        xp = self.backend.xp
        if self._dense is not None:
            return self._dense @ theta
        if self._pattern is not None:
            hits = self._pattern @ xp.astype(theta, self._pattern.dtype)
            return self._r * xp.sum(theta) + self._span * xp.astype(hits, xp.float64)
        if self._convolution is not None:
            return self._convolution.matvec(theta)
        return self.backend.to_device(np.asarray(self._host @ self.backend.to_numpy(theta)).ravel())

    def rmatvec(self, w: Any) -> Any:
        """``H.T @ w`` for a device vector."""
        xp = self.backend.xp
        if self._dense is not None:
            return xp.matmul(w, self._dense)
        if self._pattern is not None:
            hits = xp.matmul(xp.astype(w, self._pattern.dtype), self._pattern)
            return self._r * xp.sum(w) + self._span * xp.astype(hits, xp.float64)
        if self._convolution is not None:
            return self._convolution.rmatvec(w)
        return self.backend.to_device(np.asarray(self._host.T @ self.backend.to_numpy(w)).ravel())

    def em_parts(self, theta: Any) -> tuple[float, Any]:
        """(L(theta), dL/dtheta) from one pass: :meth:`~ldpsim.estimation.engine.Likelihood.em_parts` on the device."""
        xp = self.backend.xp
        p = self.matvec(theta)
        with np.errstate(divide="ignore", invalid="ignore"):  # numpy as the module: log(0) is -inf, as intended
            loglik = float(xp.sum(self.counts * xp.log(p))) + self.constant
            grad = self.rmatvec(self.counts / p)
        return loglik, grad

    def certificate(self, grad: Any) -> tuple[float, float]:
        """(relative KKT violation, gap bound): :meth:`~ldpsim.estimation.engine.Likelihood.certificate`."""
        top = float(self.backend.xp.max(grad)) / self.n
        if not math.isfinite(top):
            return math.inf, math.inf
        excess = max(top - 1.0, 0.0)
        return excess, self.n * math.log1p(excess)

    def certify(self, theta: np.ndarray) -> tuple[float, float, float]:
        """(L(theta), relative KKT violation, gap bound) of a host distribution from one pass on the device:
        :meth:`~ldpsim.estimation.engine.Likelihood.certify`."""
        loglik, grad = self.em_parts(self.backend.to_device(theta))
        return (loglik, *self.certificate(grad)) if loglik > -math.inf else (loglik, math.inf, math.inf)

    def loglik(self, theta: np.ndarray) -> float:
        """L(theta) of a host distribution, from ``H @ theta`` on the device."""
        xp = self.backend.xp
        with np.errstate(divide="ignore"):
            return float(xp.sum(self.counts * xp.log(self.matvec(self.backend.to_device(theta))))) + self.constant

    # --------------------------------------------------------------- host products
    def host_matvec(self, x: np.ndarray) -> np.ndarray:
        """``H @ x`` for a host vector, computed on the device (the Newton solver's)."""
        return self.backend.to_numpy(self.matvec(self.backend.to_device(x)))

    def host_rmatvec(self, v: np.ndarray) -> np.ndarray:
        """``H.T @ v`` for a host vector, computed on the device."""
        return self.backend.to_numpy(self.rmatvec(self.backend.to_device(v)))

    def gram(self, scale: np.ndarray) -> np.ndarray | None:
        """``H^T diag(scale^2) H`` (the Newton Hessian) formed on the device, or None for an operator without
        dense rows there (a convolution: the solver's own strategies apply)."""
        xp = self.backend.xp
        s = self.backend.to_device(scale)
        if self._dense is not None:
            a = self._dense * s[:, None]
            return self.backend.to_numpy(xp.matmul(xp.matrix_transpose(a), a))
        if self._pattern is None:
            return None
        # H = r 1 1^T + s B, S = diag(scale^2), b = B^T S 1:  H^T S H = r^2 (1^T S 1) 1 1^T + r s (1 b^T + b 1^T) + s^2 B^T S B
        s2 = s * s
        b = xp.astype(xp.matmul(xp.astype(s2, self._pattern.dtype), self._pattern), xp.float64)
        weighted = self._pattern * xp.astype(s, self._pattern.dtype)[:, None]
        inner = xp.astype(xp.matmul(xp.matrix_transpose(weighted), weighted), xp.float64)
        r, span = self._r, self._span
        total = r * r * xp.sum(s2) * xp.ones((self.size, self.size), dtype=xp.float64, **self._device())
        cross = r * span * (b[:, None] + b[None, :])
        return self.backend.to_numpy(total + cross + span**2 * inner)

    def gram32(self, rows: Any, scale: np.ndarray) -> np.ndarray:
        """``rows^T diag(scale^2) rows`` in float32 for float32 device ``rows`` (a sampled Hessian, as the host forms
        it: an estimate to ~sqrt(|X| / m) anyway), returned in float64 on the host."""
        xp = self.backend.xp
        a = rows * self.backend.to_device(scale, xp.float32)[:, None]
        return self.backend.to_numpy(xp.astype(xp.matmul(xp.matrix_transpose(a), a), xp.float64))


def _span(block: np.ndarray, low: float) -> float | None:
    """``hi - low`` where every entry of ``block`` is ``low`` or one other value ``hi``; 0.0 if all are ``low``;
    None if there are more values (or ``low`` is not in [0, 1))."""
    if not 0 <= low < 1:
        return None
    upper = block[block != low]
    if upper.size == 0:
        return 0.0
    hi = float(upper.max())
    return hi - low if bool(np.all(upper == hi)) else None
