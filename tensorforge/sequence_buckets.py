"""Sequence buckets: a model with a symbolic length runs every length on a few compiled ones.

A model whose inputs have a symbolic length (tokens, time steps) compiles one specialization
per length it is called with: a second or so for a small transformer, for every new sentence
length.  `compile(..., sequence_buckets=(32, 64, 128, 256))` runs a length that is not a bucket
at the next bucket up instead: every input axis of that length is padded (with 0, or
`pad_values[input name]`), the padded call runs on the bucket's specialization, and every
output axis that grew with the padding is cut back.  A length above the largest bucket, or one
that is a bucket, runs as it is.

Padding goes at the end of the axes, or at their start.  The end is right for a model whose
outputs at the first n positions do not read the positions after them: a transformer whose
attention-mask input marks the padding (mask 0: the padded keys get no weight), a causal
decoder, a forward RNN over time, per-position layers.  The start is right for a decoder step
that carries a key/value cache: its past length is padded at the front, where the attention
mask's 0 hides it, and the cache it returns (the past with the new keys appended) keeps the
padding at its front, where it is cut.  Other symbols that grow with the padded one are named
with it, and padded by as much: `sequence_buckets={("past", "total"): (64, 128, ...)}` pads the
past and the attention mask over past + new tokens alike (a dimension written as an expression
of the symbol, "past + 1", grows with it by itself).

Neither side is right for a model that pools over the length or attends to every position with
no mask.  The compiler cannot see which from the graph (a mask is data), so the first padded
call also runs the exact length and compares: padded at the end, and where that differs, at the
start.  Equal outputs (`CHECK_RTOL`, `CHECK_ATOL` relative to the largest magnitude) let every
later call pad on the side that matched; a difference on both sides, or an output axis that did
not grow by the padding, turns padding off for the model with one warning, and every length
compiles its own specialization as before.  `model.info["sequence_buckets"]` says which (and
why).

With no `sequence_buckets` given ("auto", compile's default), a model watches its calls: once
a symbol other than the batch has taken `AUTO_AFTER` (8) values, its lengths run at
`AUTO_BUCKETS` (16, 32, 48, 64, 96, 128, 192, ...), with the symbols that kept a fixed distance
from it in the recent calls linked (a mask over past and new tokens beside a cache's past), and
a line on stderr says so.  Being the model's own choice, padding is compared with the exact
length on the first `AUTO_CHECKS` (3) padded calls, not one, before it is trusted, and a
refusal is a line on stderr, not a warning.  A service that meets a handful of lengths never
pads; a generation loop, whose every step is a new length, stops compiling per token, and no
longer cycles through the `max_specializations` a model keeps.  `sequence_buckets=None` turns
buckets off.

Padding costs time: a length of 66 padded to 96 computes 96 positions.  A length that keeps
coming earns its own specialization once padding has cost it what a compile costs: each padded
call adds the share of its time spent on padding (its time x (1 - n / bucket)), and when that
sum reaches the model's mean compile time the length compiles as it is and runs so from then
on (the rent-or-buy rule: never more than twice the better of the two choices made in
hindsight).  At most a quarter of the specializations a model keeps (`max_specializations`
of StagedModel, 64) go to such lengths.
"""
from __future__ import annotations

import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

CHECK_RTOL = 1e-3
CHECK_ATOL = 1e-4          # times max(1, the largest magnitude of the exact output)
SIDES = ("end", "start")   # where padding goes, in the order the first padded call tries them
# sequence_buckets="auto" (compile's default): once a symbol other than the batch has taken
# AUTO_AFTER values, its lengths run at these buckets (each at most 1.5x the one below from 32
# on), trusted after AUTO_CHECKS padded calls compared with their exact lengths
AUTO_AFTER = 8
AUTO_BUCKETS = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
AUTO_CHECKS = 3


def checked_sequence_buckets(buckets: Any, symbols: Sequence[str], batch: str | None
                             ) -> tuple[tuple[str, ...], tuple] | None:
    """(the symbols padded, the first of them the one whose length picks the bucket; the sorted
    buckets) from `compile`'s `sequence_buckets`: {symbol or (symbol, linked symbols...): lengths},
    or just the lengths when the inputs have one symbol besides the leading batch; None when off."""
    if buckets is None or (not isinstance(buckets, Mapping) and len(buckets) == 0):
        return None
    if isinstance(buckets, Mapping):
        if len(buckets) != 1:
            raise ValueError(f"sequence_buckets pads one symbolic dimension (with the symbols that grow with it, "
                             f"as {{('past', 'total'): lengths}}); got {len(buckets)} entries: "
                             f"{sorted(map(str, buckets))}")
        ((key, lengths),) = buckets.items()
        names = (key,) if isinstance(key, str) else tuple(key) if isinstance(key, (tuple, list)) else None
        if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise ValueError(f"sequence_buckets keys a symbol, or a tuple of distinct symbols, got {key!r}")
        unknown = [n for n in names if n not in symbols]
        if unknown:
            raise ValueError(f"sequence_buckets names {', '.join(map(repr, unknown))}, which "
                             f"{'is' if len(unknown) == 1 else 'are'} not a symbolic dimension of the model's "
                             f"inputs ({', '.join(map(repr, symbols)) or 'it has none'})")
    else:
        lengths = buckets
        candidates = [s for s in symbols if s != batch]
        if len(candidates) != 1:
            raise ValueError("sequence_buckets: say which symbolic dimension to pad, as {symbol: lengths}; the "
                             f"model's inputs have {', '.join(map(repr, symbols)) or 'none'}")
        names = (candidates[0],)
    out = sorted({_positive(b) for b in lengths})
    if not out:
        raise ValueError(f"sequence_buckets for {names[0]!r} holds no length")
    return names, tuple(out)


def _positive(b: Any) -> int:
    if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, np.integer)) or b < 1:
        raise ValueError(f"sequence_buckets must be positive integers, got {b!r}")
    return int(b)


def _symbols_of(dim: Any) -> set[str]:
    """The symbols a dimension names: itself, or the names in an expression ("past + 1")."""
    if not isinstance(dim, str):
        return set()
    return {dim} | set(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", dim))


@dataclass
class SequencePadding:
    """How a model pads one symbolic length: `axes` are each input's axes of that length (or of
    the symbols linked to it, padded by as much), `length_axes` the axes that give the call's
    length, `pad_values` what fills them; `status` is "unchecked" until the first padded call
    compares with the exact length, then "verified" (padding on `side`) or "refused" (`reason`
    says why)."""
    name: str
    symbol: str
    buckets: tuple[int, ...]
    axes: dict[str, tuple[int, ...]]
    pad_values: dict[str, Any] = field(default_factory=dict)
    linked: tuple[str, ...] = ()
    length_axes: dict[str, int] = field(default_factory=dict)
    status: str = "unchecked"
    side: str = "end"
    checked: int = 0                     # padded calls compared with the exact length so far
    auto: bool = False                   # chosen by the model (sequence_buckets="auto")
    watched: dict = field(default_factory=dict)  # auto, before a symbol is chosen: what the calls had
    reason: str = ""
    out_axes: tuple[tuple[int, ...], ...] | None = None
    runs_as: dict[int, int] = field(default_factory=dict)
    padded_calls: int = 0
    own_limit: int = 16                  # lengths that may earn their own specialization
    own: set = field(default_factory=set)                   # the lengths that did
    wasted: dict[int, float] = field(default_factory=dict)  # per length: seconds spent on padding

    @property
    def checks(self) -> int:
        """Padded calls compared with the exact length before padding is trusted."""
        return AUTO_CHECKS if self.auto else 1

    @classmethod
    def make(cls, name: str, inputs: Iterable[tuple[str, Sequence | None]], buckets: Any,
             pad_values: Mapping[str, Any] | None, batch: str | None, keep: int) -> "SequencePadding | None":
        """From the inputs' (name, dims) with symbols as strings; None when `buckets` is off.
        `keep`: how many specializations the model keeps (a quarter may go to lengths that earn
        their own).  `buckets="auto"` watches the calls and chooses a symbol later (`observe`)."""
        inputs = [(n, tuple(dims or ())) for n, dims in inputs]
        symbols: list[str] = []
        for _, dims in inputs:
            for d in dims:
                if isinstance(d, str) and d not in symbols:
                    symbols.append(d)
        if isinstance(buckets, str):
            if buckets != "auto":
                raise ValueError(f"sequence_buckets is lengths, {{symbol: lengths}}, 'auto' or None; got {buckets!r}")
            candidates = [d for d in symbols if d != batch and _symbols_of(d) == {d}]
            if not candidates:
                if pad_values:
                    raise ValueError(f"pad_values names {sorted(pad_values)}, but the model's inputs have no "
                                     "symbolic length besides the batch to pad")
                return None
            padding = cls(name, "", AUTO_BUCKETS, {}, status="watching", auto=True,
                          own_limit=keep // 4)
            padding.watched = {"inputs": inputs, "candidates": candidates, "pad_values": dict(pad_values or {}),
                               "calls": []}
            padding._check_pad_values(dict(pad_values or {}), {n for n, dims in inputs if set(dims) & set(candidates)})
            return padding
        names = {s for _, dims in inputs for d in dims for s in _symbols_of(d)}
        chosen = checked_sequence_buckets(buckets, symbols + sorted(names - set(symbols)), batch)
        if chosen is None:
            if pad_values:
                raise ValueError("pad_values needs sequence_buckets")
            return None
        padded, lengths = chosen
        padding = cls(name, padded[0], lengths, {}, own_limit=keep // 4)
        padding._configure(inputs, padded, dict(pad_values or {}))
        return padding

    def _configure(self, inputs: list, padded: tuple[str, ...], values: dict) -> None:
        """Pad the symbols `padded` (the first picks the bucket) of `inputs` ((name, dims))."""
        symbol = self.symbol = padded[0]
        self.linked = padded[1:]
        axes = {n: tuple(k for k, d in enumerate(dims) if _symbols_of(d) & set(padded)) for n, dims in inputs}
        self.axes = {n: a for n, a in axes.items() if a}
        self.length_axes = {n: dims.index(symbol) for n, dims in inputs if symbol in dims}
        if not self.length_axes:
            raise ValueError(f"sequence_buckets: no input has an axis that is {symbol!r} itself, to tell the "
                             "call's length; name that symbol first")
        self._check_pad_values(values, set(self.axes))
        self.pad_values = values

    def _check_pad_values(self, values: dict, padded_inputs: set) -> None:
        unknown = sorted(set(values) - padded_inputs)
        if unknown:
            what = f"no {self.symbol!r} axis" if self.symbol else "no symbolic length"
            raise ValueError(f"pad_values names {unknown}, which have {what}; the inputs that can be padded are "
                             f"{sorted(padded_inputs)}")
        for n, v in values.items():
            if not np.isscalar(v):
                raise ValueError(f"pad_values[{n!r}] must be a scalar, got {type(v).__name__}")

    def observe(self, arrays: Mapping[str, Any]) -> None:
        """Auto, watching: note the call's symbol values; once a symbol has taken `AUTO_AFTER`
        values, pad it from the next call on, with the symbols that kept a fixed distance from
        it linked (the mask over past and new tokens, beside the cache's past)."""
        watched = self.watched
        values: dict[str, int] = {}
        for name, dims in watched["inputs"]:
            a = arrays.get(name)
            if _is_tensor(a) and a.ndim == len(dims):
                for k, d in enumerate(dims):
                    if d in watched["candidates"]:
                        values.setdefault(d, int(a.shape[k]))
        calls = watched["calls"]
        if not values or (calls and calls[-1] == values):
            return
        calls.append(values)
        del calls[:-4 * AUTO_AFTER]
        for symbol in watched["candidates"]:
            seen = {c[symbol] for c in calls if symbol in c}
            if len(seen) < AUTO_AFTER:
                continue
            recent = calls[-(AUTO_AFTER // 2):]     # (a prompt before the steps has its own distance)
            linked = tuple(t for t in watched["candidates"] if t != symbol and all(t in c for c in recent)
                           and len({c[t] - c.get(symbol, 0) for c in recent}) == 1
                           and len({c[t] for c in recent}) > 1)
            chosen = {symbol, *linked}            # (pad_values for inputs of other symbols stay unused)
            values = {n: v for n, v in watched["pad_values"].items()
                      if any(_symbols_of(d) & chosen for d in dict(watched["inputs"])[n])}
            self._configure(watched["inputs"], (symbol, *linked), values)
            self.status, self.watched = "unchecked", {}
            with_ = f" (with {', '.join(map(repr, linked))})" if linked else ""
            print(f"tensorforge: model {self.name} has met {len(seen)} values of {symbol!r}; from now on a value "
                  f"that is not a bucket runs padded{with_} to the next of {', '.join(map(str, self.buckets[:6]))}, "
                  f"... where that leaves the outputs as they are (checked on {self.checks} calls; "
                  "compile(..., sequence_buckets=None) turns this off)", file=sys.stderr)
            return

    # -- per call --------------------------------------------------------------------------------
    def bucket_for(self, arrays: Mapping[str, Any]) -> tuple[int, int] | None:
        """(the call's length, the bucket it runs at) when the call pads, else None."""
        if self.status == "refused":
            return None
        if self.status == "watching":
            self.observe(arrays)
            return None
        for name, axis in self.length_axes.items():
            a = arrays.get(name)
            if _is_tensor(a) and a.ndim > axis:
                n = a.shape[axis]
                break
        else:
            return None
        if n == 0 or n in self.buckets or n > self.buckets[-1] or n in self.own:
            return None
        return n, next(b for b in self.buckets if b > n)

    def padded(self, arrays: Mapping[str, Any], n: int, size: int, side: str | None = None) -> dict:
        """The call's inputs (NumPy arrays or torch tensors) with every axis of the symbol (and
        of the symbols linked to it) grown by `size - n`, at the end or at the start (`side`,
        the verified one by default)."""
        side = side or self.side
        grow = size - n
        out = dict(arrays)
        for name, axes in self.axes.items():
            a = out.get(name)
            if isinstance(a, np.ndarray):
                out[name] = _pad_array(a, axes, grow, side, self.pad_values.get(name, 0))
            elif _is_tensor(a):                  # a torch tensor (torch.compile's graphs): with torch
                import torch
                for k in axes:
                    extra = list(a.shape)
                    extra[k] = grow
                    fill = a.new_full(extra, self.pad_values.get(name, 0))
                    a = torch.cat([a, fill] if side == "end" else [fill, a], dim=k)
                out[name] = a
        return out

    def cut(self, outs: Sequence, n: int, size: int) -> list:
        """The padded call's outputs with their grown axes cut back to the call's length."""
        assert self.out_axes is not None
        self.padded_calls += 1
        self.runs_as[n] = size
        grow = size - n
        got = []
        for out, axes in zip(outs, self.out_axes):
            if axes:
                keep = slice(0, -grow) if self.side == "end" else slice(grow, None)
                out = out[tuple(keep if k in axes else slice(None) for k in range(out.ndim))]
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

    def judge(self, exact: Sequence, padded: Sequence, n: int, size: int, side: str = "end") -> str | None:
        """Compare a padded call (padded on `side`) with the exact length: None when padding
        there is sound, and it is from then on; else what differs."""
        why, axes = _compare(exact, padded, size - n, side)
        if why is None:
            self.status, self.side, self.out_axes = "verified", side, axes
            self.checked += 1
            self.cut(padded, n, size)        # counts the call
        return why

    def refuse(self, n: int, size: int, why: Mapping[str, str]) -> None:
        """Padding off for the model, with one warning saying what differed on each side."""
        self.status = "refused"
        sides = "; ".join(f"at the {side}, {text}" for side, text in why.items())
        self.reason = f"at {self.symbol} = {n} padded to {size}: {sides}"
        hint = ""
        if any("failed" in text for text in why.values()) and not self.linked:
            hint = (" (if another input's length grows with it, as an attention mask over past and new tokens, "
                    f"name both: sequence_buckets={{({self.symbol!r}, 'total'): ...}})")
        text = (f"model {self.name}: padding {self.symbol!r} to a sequence bucket changes its outputs "
                f"({self.reason}){hint}; every {self.symbol} compiles its own specialization")
        if self.auto:                        # the model's own choice: a note, not a warning
            print(f"tensorforge: {text}", file=sys.stderr)
        else:
            warnings.warn(text, RuntimeWarning, stacklevel=4)

    def describe(self) -> dict:
        return {"symbol": self.symbol, "linked": self.linked, "buckets": self.buckets, "status": self.status,
                "auto": self.auto, "checked": self.checked,
                "side": self.side if self.status == "verified" else None, "reason": self.reason,
                "padded_calls": self.padded_calls, "runs_as": dict(self.runs_as), "own": sorted(self.own)}


def run_padded(padding: SequencePadding | None, inputs: dict, run: Callable[[dict], list], info: dict) -> list:
    """`run(inputs)` -> outputs, at the call's sequence bucket when `padding` pads it (the first
    such call also runs the exact length, to check that padding leaves the outputs as they are,
    at the end of the axes or else at their start); `info` (the model's) holds its compile counts
    and gets `padding.describe()`."""
    if padding is None:
        return run(inputs)
    info["sequence_buckets"] = padding.describe()
    found = padding.bucket_for(inputs)
    if found is None:
        return run(inputs)
    n, size = found
    began, compiled_before = time.perf_counter(), max(1, info.get("specializations", 0))
    if padding.status == "verified" and padding.checked >= padding.checks:
        try:
            padded = run(padding.padded(inputs, n, size))
        except ValueError:         # a padded length the model refuses (a Dim's maximum): run as it is
            return run(inputs)
        outs = padding.cut(padded, n, size)
        compiles = max(1, info.get("specializations", 0))
        if compiles == compiled_before:  # (a call that compiled its bucket says nothing of padding's cost)
            padding.paid(n, size, time.perf_counter() - began, info.get("compile_seconds", 0.0) / compiles)
        info["sequence_buckets"] = padding.describe()
        return outs
    exact = run(dict(inputs))      # (a run may drop the inputs it has used from its dict)
    why: dict[str, str] = {}
    for side in (padding.side,) if padding.status == "verified" else SIDES:
        try:
            padded = run(padding.padded(inputs, n, size, side))
        except Exception as e:     # noqa: BLE001  (a padded shape the graph cannot take: not this side)
            why[side] = f"the padded call failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            continue
        differs = padding.judge(exact, padded, n, size, side)
        if differs is None:
            break
        why[side] = differs
    else:
        padding.refuse(n, size, why)
    info["sequence_buckets"] = padding.describe()
    return exact


def _pad_array(a: np.ndarray, axes: Sequence[int], grow: int, side: str, fill: Any) -> np.ndarray:
    """`a` with each of `axes` grown by `grow` at its end or start, the new places `fill`
    (np.pad's result, at a tenth of its cost on a step's small arrays)."""
    shape = list(a.shape)
    for k in axes:
        shape[k] += grow
    out = np.empty(shape, a.dtype)
    old = tuple((slice(grow, None) if side == "start" else slice(0, a.shape[k])) if k in axes else slice(None)
                for k in range(a.ndim))
    out[old] = a
    for k in axes:
        new = slice(0, grow) if side == "start" else slice(a.shape[k], None)
        out[tuple(new if j == k else slice(None) for j in range(a.ndim))] = fill
    return out


def _is_tensor(a: Any) -> bool:
    """A NumPy array or a torch tensor."""
    return isinstance(a, np.ndarray) or (type(a).__module__.startswith("torch") and hasattr(a, "shape"))


def _compare(exact: Sequence, padded: Sequence, grown: int, side: str = "end") -> tuple[str | None, tuple]:
    """(None, each output's grown axes) when the padded outputs, cut on `side`, equal the exact
    ones; else (what differs, ())."""
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
        index = tuple(slice(p.shape[a] - e.shape[a], None) if side == "start" else slice(0, e.shape[a])
                      for a in range(e.ndim))
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
