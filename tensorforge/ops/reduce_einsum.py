"""einsum: a generic TE compute for an Einstein-summation equation ("bij,bjk->bik", "ii->i",
"...ij,...jk", implicit outputs).

The equation is parsed into one label list per operand and one for the output; '...' becomes
numbered labels, right-aligned across operands so that ellipsis dimensions broadcast.  The compute
has one data axis per output label and one reduce axis per label that is summed away; its body is
the product of the operands read at their labels (a size-1 broadcast dimension reads index 0).
Pattern COMPLEX (matmul-like: elementwise consumers fuse onto its output), tag "einsum".
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from .. import te
from .common import const_shape
from .reduce import accum_dtype
from .registry import COMPLEX, OpError, TensorType, op

_TERM = re.compile(r"^(?:[A-Za-z]|\.\.\.)*$")


def _split_term(term: str, ndim: int, ell_rank: int, k: int) -> list[str]:
    """Labels of one operand term; the ellipsis covers the dimensions the letters leave over."""
    letters = term.replace("...", "")
    if "..." in term:
        n = ndim - len(letters)
        if n < 0:
            raise OpError(f"einsum: operand {k} has rank {ndim}, fewer than term {term!r} names")
        head, tail = term.split("...")
        return list(head) + [f"...{ell_rank - n + j}" for j in range(n)] + list(tail)
    if len(letters) != ndim:
        raise OpError(f"einsum: term {term!r} names {len(letters)} axes but operand {k} has rank {ndim}")
    return list(letters)


def parse_einsum(equation: str, shapes: Sequence[Sequence[int]]) -> tuple[list, list, dict]:
    """(labels per operand, output labels, label -> size); OpError for a malformed equation."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise OpError(f"einsum: equation {equation!r} has {len(terms)} operand term(s) for {len(shapes)} input(s)")
    for t in terms + ([rhs] if arrow else []):
        if not _TERM.match(t) or t.count("...") > 1:
            raise OpError(f"einsum: malformed term {t!r} in equation {equation!r}")
    ell_rank = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t), default=0)
    labels = [_split_term(t, len(s), ell_rank, k) for k, (t, s) in enumerate(zip(terms, shapes))]
    sizes: dict = {}
    for k, (ls, shape) in enumerate(zip(labels, shapes)):
        for lab, d in zip(ls, shape):
            d = int(d)
            old = sizes.get(lab)
            if old is None or old == 1:
                sizes[lab] = d
            elif d not in (1, old) or (d == 1 and not lab.startswith("...")):
                raise OpError(f"einsum: label {lab!r} has size {old} and size {d} (operand {k}) in {equation!r}")
    ellipsis = [f"...{j}" for j in range(ell_rank)]
    if arrow:
        out = _split_term(rhs, len(rhs.replace("...", "")) + (ell_rank if "..." in rhs else 0), ell_rank, -1)
        missing = [lab for lab in out if lab not in sizes]
        if missing or len(set(out)) != len(out):
            raise OpError(f"einsum: output term {rhs!r} repeats a label or names one no input has")
    else:
        counts: dict = {}
        for ls in labels:
            for lab in ls:
                counts[lab] = counts.get(lab, 0) + 1
        out = ellipsis + sorted(lab for lab, c in counts.items() if c == 1 and not lab.startswith("..."))
    return labels, out, sizes


@op("einsum", pattern=COMPLEX)
class einsum:
    def infer(*xs: TensorType, equation: str) -> TensorType:
        if not xs or any(x.dtype != xs[0].dtype for x in xs):
            raise OpError("einsum: needs at least one input, all of one dtype")
        if xs[0].dtype == "bool":
            raise OpError("einsum: bool inputs are not supported")
        _, out, sizes = parse_einsum(equation, [x.shape for x in xs])
        return TensorType(tuple(sizes[lab] for lab in out), xs[0].dtype)

    def compute(*xs: te.Tensor, equation: str) -> te.Tensor:
        shapes = [const_shape(x) for x in xs]
        labels, out, sizes = parse_einsum(equation, shapes)
        summed = [lab for lab in sizes if lab not in out]
        acc = accum_dtype(xs[0].dtype)

        def f(*o):
            env = dict(zip(out, o))
            rvars = [te.reduce_axis((0, sizes[lab]), name=f"r_{lab.strip('.') or 'e'}") for lab in summed]
            env.update(zip(summed, rvars))
            term = None
            for x, ls, shape in zip(xs, labels, shapes):
                idx = tuple(0 if d == 1 and sizes[lab] != 1 else env[lab] for lab, d in zip(ls, shape))
                v = x[idx].astype(acc)
                term = v if term is None else term * v
            return te.sum(term, axis=rvars) if rvars else term

        out_shape = tuple(sizes[lab] for lab in out)
        if acc == xs[0].dtype:
            return te.compute(out_shape, f, name="einsum", tag="einsum")
        total = te.compute(out_shape, f, name="einsum_acc", tag="einsum")
        return te.compute(out_shape, lambda *o: total[o].astype(xs[0].dtype), name="einsum_cast")

    def reference(*xs: np.ndarray, equation: str) -> np.ndarray:
        parse_einsum(equation, [x.shape for x in xs])
        acc = accum_dtype(xs[0].dtype.name)
        return np.einsum(equation.replace(" ", ""), *[x.astype(acc) for x in xs]).astype(xs[0].dtype)
