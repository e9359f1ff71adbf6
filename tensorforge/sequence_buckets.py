"""Sequence buckets: a model with a symbolic length runs every length on a few compiled ones.

A model whose inputs have a symbolic length (tokens, time steps) compiles one specialization
per length it is called with: a second or so for a small transformer, for every new sentence
length.  `compile(..., sequence_buckets=(32, 64, 128, 256))` runs a length that is not a bucket
at the next bucket up instead: every input axis of that length is padded at its end (with 0, or
`pad_values[input name]`), the padded call runs on the bucket's specialization, and every
output axis that grew with the padding is cut back.  A length above the largest bucket, or one
that is a bucket, runs as it is.

That gives the right answer only for a model whose outputs at the first n positions do not read
the positions after them: a transformer whose attention-mask input marks the padding (mask 0:
the padded keys get no weight), a causal decoder, an RNN over time, per-position layers.  It is
wrong for a model that pools over the length or attends to every position with no mask.  The
compiler cannot see which from the graph (a mask is data), so the first padded call also runs
the exact length and compares: equal outputs (`CHECK_RTOL`, `CHECK_ATOL` relative to the largest
magnitude) let every later call pad; a difference, or an output axis that did not grow by the
padding, turns padding off for the model with one warning, and every length compiles its own
specialization as before.  `model.info["sequence_buckets"]` says which (and why).

Padding costs time: a length of 66 padded to 96 computes 96 positions.  A length that keeps
coming earns its own specialization once padding has cost it what a compile costs: each padded
call adds the share of its time spent on padding (its time x (1 - n / bucket)), and when that
sum reaches the model's mean compile time the length compiles as it is and runs so from then
on (the rent-or-buy rule: never more than twice the better of the two choices made in
hindsight).  At most a quarter of the specializations a model keeps (`max_specializations`
of StagedModel, 64) go to such lengths.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

CHECK_RTOL = 1e-3
CHECK_ATOL = 1e-4          # times max(1, the largest magnitude of the exact output)


def checked_sequence_buckets(buckets: Any, symbols: Sequence[str], batch: str | None) -> tuple[str, tuple] | None:
    """(symbol, sorted buckets) from `compile`'s `sequence_buckets`: {symbol: lengths}, or just
    the lengths when the inputs have one symbol besides the leading batch; None when off."""
    if buckets is None or (not isinstance(buckets, Mapping) and len(buckets) == 0):
        return None
    if isinstance(buckets, Mapping):
        if len(buckets) != 1:
            raise ValueError(f"sequence_buckets pads one symbolic dimension; got {len(buckets)}: {sorted(buckets)}")
        ((symbol, lengths),) = buckets.items()
        if symbol not in symbols:
            raise ValueError(f"sequence_buckets names {symbol!r}, which is not a symbolic dimension of the "
                             f"model's inputs ({', '.join(map(repr, symbols)) or 'it has none'})")
    else:
        lengths = buckets
        candidates = [s for s in symbols if s != batch]
        if len(candidates) != 1:
            raise ValueError("sequence_buckets: say which symbolic dimension to pad, as {symbol: lengths}; the "
                             f"model's inputs have {', '.join(map(repr, symbols)) or 'none'}")
        symbol = candidates[0]
    out = sorted({_positive(b) for b in lengths})
    if not out:
        raise ValueError(f"sequence_buckets for {symbol!r} holds no length")
    return symbol, tuple(out)


def _positive(b: Any) -> int:
    if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, np.integer)) or b < 1:
        raise ValueError(f"sequence_buckets must be positive integers, got {b!r}")
    return int(b)


@dataclass
class SequencePadding:
    """How a model pads one symbolic length: `axes` are each input's axes of that length,
    `pad_values` what fills them; `status` is "unchecked" until the first padded call compares
    with the exact length, then "verified" or "refused" (`reason` says why)."""
    name: str
    symbol: str
    buckets: tuple[int, ...]
    axes: dict[str, tuple[int, ...]]
    pad_values: dict[str, Any] = field(default_factory=dict)
    status: str = "unchecked"
    reason: str = ""
    out_axes: tuple[tuple[int, ...], ...] | None = None
    runs_as: dict[int, int] = field(default_factory=dict)
    padded_calls: int = 0
    own_limit: int = 16                  # lengths that may earn their own specialization
    own: set = field(default_factory=set)                   # the lengths that did
    wasted: dict[int, float] = field(default_factory=dict)  # per length: seconds spent on padding

    @classmethod
    def make(cls, name: str, inputs: Iterable[tuple[str, Sequence | None]], buckets: Any,
             pad_values: Mapping[str, Any] | None, batch: str | None, keep: int) -> "SequencePadding | None":
        """From the inputs' (name, dims) with symbols as strings; None when `buckets` is off.
        `keep`: how many specializations the model keeps (a quarter may go to lengths that earn
        their own)."""
        inputs = list(inputs)
        symbols: list[str] = []
        for _, dims in inputs:
            for d in dims or ():
                if isinstance(d, str) and d not in symbols:
                    symbols.append(d)
        chosen = checked_sequence_buckets(buckets, symbols, batch)
        if chosen is None:
            if pad_values:
                raise ValueError("pad_values needs sequence_buckets")
            return None
        symbol, lengths = chosen
        axes = {n: tuple(k for k, d in enumerate(dims or ()) if d == symbol) for n, dims in inputs}
        axes = {n: a for n, a in axes.items() if a}
        values = dict(pad_values or {})
        unknown = sorted(set(values) - set(axes))
        if unknown:
            raise ValueError(f"pad_values names {unknown}, which have no {symbol!r} axis; the inputs that are "
                             f"padded are {sorted(axes)}")
        for n, v in values.items():
            if not np.isscalar(v):
                raise ValueError(f"pad_values[{n!r}] must be a scalar, got {type(v).__name__}")
        return cls(name, symbol, lengths, axes, values, own_limit=keep // 4)

    # -- per call --------------------------------------------------------------------------------
    def bucket_for(self, arrays: Mapping[str, Any]) -> tuple[int, int] | None:
        """(the call's length, the bucket it runs at) when the call pads, else None."""
        if self.status == "refused":
            return None
        for name, axes in self.axes.items():
            a = arrays.get(name)
            if _is_tensor(a) and a.ndim > max(axes):
                n = a.shape[axes[0]]
                break
        else:
            return None
        if n == 0 or n in self.buckets or n > self.buckets[-1] or n in self.own:
            return None
        return n, next(b for b in self.buckets if b > n)

    def padded(self, arrays: Mapping[str, Any], n: int, size: int) -> dict:
        """The call's inputs (NumPy arrays or torch tensors) with every axis of the symbol
        padded from `n` to `size`."""
        out = dict(arrays)
        for name, axes in self.axes.items():
            a = out.get(name)
            if isinstance(a, np.ndarray):
                widths = [(0, size - n if k in axes else 0) for k in range(a.ndim)]
                fill = np.asarray(self.pad_values.get(name, 0)).astype(a.dtype)
                out[name] = np.pad(a, widths, constant_values=fill)
            elif _is_tensor(a):                  # a torch tensor (torch.compile's graphs): with torch
                import torch
                for k in axes:
                    extra = list(a.shape)
                    extra[k] = size - n
                    a = torch.cat([a, a.new_full(extra, self.pad_values.get(name, 0))], dim=k)
                out[name] = a
        return out

    def cut(self, outs: Sequence, n: int, size: int) -> list:
        """The padded call's outputs with their grown axes cut back to the call's length."""
        assert self.out_axes is not None
        self.padded_calls += 1
        self.runs_as[n] = size
        got = []
        for out, axes in zip(outs, self.out_axes):
            if axes:
                index = tuple(slice(0, out.shape[k] - (size - n)) if k in axes else slice(None)
                              for k in range(out.ndim))
                out = out[index]
                out = out.contiguous() if hasattr(out, "contiguous") else np.ascontiguousarray(out)
            got.append(out)
        return got

    def paid(self, n: int, size: int, seconds: float, compile_seconds: float) -> None:
        """Count a padded call of `seconds`; the length runs as it is from its next call once
        padding has cost it `compile_seconds` (the module docstring's rent-or-buy rule)."""
        self.wasted[n] = self.wasted.get(n, 0.0) + seconds * (1.0 - n / size)
        if self.wasted[n] >= compile_seconds and len(self.own) < self.own_limit:
            self.own.add(n)
            self.runs_as[n] = n

    def judge(self, exact: Sequence, padded: Sequence, n: int, size: int) -> bool:
        """Compare the first padded call with the exact length; True when padding is sound."""
        why, axes = _compare(exact, padded, size - n)
        if why is None:
            self.status, self.out_axes = "verified", axes
            self.cut(padded, n, size)        # counts the call
            return True
        self.status = "refused"
        self.reason = f"at {self.symbol} = {n} padded to {size}, {why}"
        warnings.warn(f"model {self.name}: padding {self.symbol!r} to a sequence bucket changes its outputs "
                      f"({self.reason}); every {self.symbol} compiles its own specialization",
                      RuntimeWarning, stacklevel=4)
        return False

    def describe(self) -> dict:
        return {"symbol": self.symbol, "buckets": self.buckets, "status": self.status, "reason": self.reason,
                "padded_calls": self.padded_calls, "runs_as": dict(self.runs_as), "own": sorted(self.own)}


def run_padded(padding: SequencePadding | None, inputs: dict, run: Callable[[dict], list], info: dict) -> list:
    """`run(inputs)` -> outputs, at the call's sequence bucket when `padding` pads it (the first
    such call also runs the exact length, to check that padding leaves the outputs as they are);
    `info` (the model's) holds its compile counts and gets `padding.describe()`."""
    if padding is None:
        return run(inputs)
    info["sequence_buckets"] = padding.describe()
    found = padding.bucket_for(inputs)
    if found is None:
        return run(inputs)
    n, size = found
    began = time.perf_counter()
    try:
        padded = run(padding.padded(inputs, n, size))
    except ValueError:             # a padded length the model refuses (a Dim's maximum): run as it is
        return run(inputs)
    if padding.status == "verified":
        outs = padding.cut(padded, n, size)
        compiles = max(1, info.get("specializations", 0))
        padding.paid(n, size, time.perf_counter() - began, info.get("compile_seconds", 0.0) / compiles)
    else:
        outs = run(inputs)
        padding.judge(outs, padded, n, size)
    info["sequence_buckets"] = padding.describe()
    return outs


def _is_tensor(a: Any) -> bool:
    """A NumPy array or a torch tensor."""
    return isinstance(a, np.ndarray) or (type(a).__module__.startswith("torch") and hasattr(a, "shape"))


def _compare(exact: Sequence, padded: Sequence, grown: int) -> tuple[str | None, tuple]:
    """(None, each output's grown axes) when the padded outputs, cut, equal the exact ones;
    else (what differs, ())."""
    axes_all = []
    for k, (e, p) in enumerate(zip(exact, padded)):
        e, p = (x.detach().cpu().numpy() if _is_tensor(x) and not isinstance(x, np.ndarray) else x for x in (e, p))
        if not isinstance(e, np.ndarray) or not isinstance(p, np.ndarray):
            return f"output {k} is not a tensor", ()
        if e.ndim != p.ndim or e.dtype != p.dtype:
            return f"output {k} has shape {p.shape} {p.dtype} padded, {e.shape} {e.dtype} exact", ()
        axes = tuple(a for a in range(e.ndim) if e.shape[a] != p.shape[a])
        if any(p.shape[a] - e.shape[a] != grown for a in axes):
            return f"output {k} has shape {p.shape} padded and {e.shape} exact, not {grown} longer", ()
        index = tuple(slice(0, e.shape[a]) for a in range(e.ndim))
        cut = p[index]
        if e.dtype.kind in "fc":
            scale = max(1.0, float(np.max(np.abs(e[np.isfinite(e)]), initial=0.0)))
            same = np.allclose(cut, e, rtol=CHECK_RTOL, atol=CHECK_ATOL * scale, equal_nan=True)
        else:
            same = np.array_equal(cut, e)
        if not same:
            diff = np.abs(cut.astype(np.float64) - e.astype(np.float64)) if e.dtype.kind in "fciub" else None
            worst = f", by up to {np.nanmax(diff):.2g}" if diff is not None and diff.size else ""
            return f"output {k} differs from the exact length's{worst}", ()
        axes_all.append(axes)
    return None, tuple(axes_all)
