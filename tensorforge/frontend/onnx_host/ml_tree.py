"""ai.onnx.ml TreeEnsemble (opset 5) on the host.

The trees are flat tables (`nodes_*` for interior nodes, `leaf_*` for leaves).  Each tree is
evaluated for the whole batch at once: every sample holds the index of the node it stands at,
and each step moves all samples still at an interior node to its true or false branch, until
every sample stands at a leaf (at most the tree's depth steps).  Leaf weights are then gathered
into their targets with the aggregate function, and the post transform applied.

A node compares the feature `nodes_featureids[i]` with `nodes_splits[i]` by `nodes_modes[i]`
(0 <=, 1 <, 2 >=, 3 >, 4 ==, 5 !=, 6 membership in the i-th set of `membership_values`, sets
delimited by NaN); a NaN feature takes the true branch where `nodes_missing_value_tracks_true`
is 1, else whatever the comparison gives (false, except for !=).
"""
from __future__ import annotations

import math

import numpy as np

from . import HostContext, host_op

ML = "ai.onnx.ml"
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
AVERAGE, SUM, MIN, MAX = range(4)
NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT = range(5)


def _ints(attrs: dict, name: str, ctx: HostContext, required: bool = True) -> np.ndarray:
    v = attrs.get(name)
    if v is None:
        if required:
            raise ctx.error(f"the {name!r} attribute is required")
        return np.zeros(0, dtype=np.int64)
    return np.asarray(v).astype(np.int64).reshape(-1)


def _member_sets(ctx: HostContext, modes: np.ndarray, values) -> dict[int, np.ndarray]:
    """Node index -> the set of values of each membership node, in node order."""
    members = [i for i in range(len(modes)) if modes[i] == MEMBER]
    if not members:
        return {}
    if values is None:
        raise ctx.error("membership_values is required when a node has mode BRANCH_MEMBER")
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    sets: list[np.ndarray] = []
    current: list[float] = []
    for v in flat:
        if math.isnan(v):
            sets.append(np.asarray(current))
            current = []
        else:
            current.append(v)
    sets.append(np.asarray(current))
    if len(sets) < len(members):
        raise ctx.error(f"membership_values holds {len(sets)} set(s) for {len(members)} membership node(s)")
    return dict(zip(members, sets))


def _branch(x: np.ndarray, mode: int, split: float, members: np.ndarray | None) -> np.ndarray:
    if mode == LEQ:
        return x <= split
    if mode == LT:
        return x < split
    if mode == GTE:
        return x >= split
    if mode == GT:
        return x > split
    if mode == EQ:
        return x == split
    if mode == NEQ:
        return x != split
    return np.isin(x, members if members is not None else np.zeros(0))


def _leaves(ctx: HostContext, x: np.ndarray, root: int, t: dict, members: dict) -> np.ndarray:
    """The leaf index each sample of `x` reaches in the tree rooted at node `root`."""
    n_nodes = len(t["modes"])
    node = np.full(x.shape[0], root, dtype=np.int64)
    leaf = np.full(x.shape[0], -1, dtype=np.int64)
    active = np.arange(x.shape[0])
    for _ in range(n_nodes + 1):
        if active.size == 0:
            return leaf
        here = node[active]
        go_true = np.zeros(active.size, dtype=bool)
        for i in np.unique(here):
            sel = here == i
            f = t["features"][i]
            if not 0 <= f < x.shape[1]:
                raise ctx.error(f"node {i} reads feature {f}, but X has {x.shape[1]} features")
            values = x[active[sel], f]
            taken = _branch(values, int(t["modes"][i]), t["splits"][i], members.get(int(i)))
            if t["missing_true"][i]:
                taken = taken | np.isnan(values)
            go_true[sel] = taken
        target = np.where(go_true, t["true_ids"][here], t["false_ids"][here])
        is_leaf = np.where(go_true, t["true_leaf"][here], t["false_leaf"][here]).astype(bool)
        leaf[active[is_leaf]] = target[is_leaf]
        node[active[~is_leaf]] = target[~is_leaf]
        active = active[~is_leaf]
    raise ctx.error(f"the tree rooted at node {root} has a cycle")


def _probit(v: np.ndarray) -> np.ndarray:
    """sqrt(2) * erfinv(2v - 1): a starting guess refined by Newton steps on math.erf."""
    y = np.clip(2.0 * v.astype(np.float64) - 1.0, -1.0, 1.0)
    out = np.empty_like(y)
    for k, t in enumerate(y.reshape(-1)):
        if abs(t) == 1.0:
            out.reshape(-1)[k] = math.copysign(math.inf, t)
            continue
        z = math.copysign(math.sqrt(-math.log((1.0 - abs(t)) / 2.0)), t) if abs(t) > 0.7 else t * math.sqrt(math.pi) / 2
        for _ in range(50):
            step = (math.erf(z) - t) / (2.0 / math.sqrt(math.pi) * math.exp(-z * z))
            z -= step
            if abs(step) < 1e-15 * max(1.0, abs(z)):
                break
        out.reshape(-1)[k] = z
    return math.sqrt(2.0) * out


def post_transform(scores: np.ndarray, kind: int) -> np.ndarray:
    """The ML post transforms, over the targets of each row."""
    s = scores.astype(np.float64)
    if kind == NONE:
        return s
    if kind == SOFTMAX:
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if kind == LOGISTIC:
        return 1.0 / (1.0 + np.exp(-s))
    if kind == SOFTMAX_ZERO:    # softmax over the nonzero scores; zeros stay zero
        nz = s != 0
        m = np.where(nz, s, -np.inf).max(axis=1, keepdims=True)
        e = np.where(nz, np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
        total = e.sum(axis=1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    if kind == PROBIT:
        return _probit(s)
    raise ValueError(f"post_transform must be 0 to 4, got {kind}")


@host_op("TreeEnsemble", domain=ML)
def tree_ensemble(ctx, inputs, attrs):
    """Y [N, n_targets] from X [N, F]: per target, the aggregate (AVERAGE 0, SUM 1, MIN 2,
    MAX 3) of the weights of the leaves that X reaches in each tree, then the post transform
    (NONE 0, SOFTMAX 1, LOGISTIC 2, SOFTMAX_ZERO 3, PROBIT 4)."""
    x = np.asarray(inputs[0])
    if x.dtype.kind != "f":
        raise ctx.error(f"X must be a floating point tensor, got dtype {x.dtype.name}")
    if x.ndim != 2:
        raise ctx.error(f"X must be [N, F], got shape {list(x.shape)}")
    x2 = x
    modes = _ints(attrs, "nodes_modes", ctx)
    n = len(modes)
    t = {
        "modes": modes,
        "features": _ints(attrs, "nodes_featureids", ctx),
        "splits": np.asarray(attrs.get("nodes_splits", np.zeros(n)), dtype=np.float64).reshape(-1),
        "true_ids": _ints(attrs, "nodes_truenodeids", ctx),
        "false_ids": _ints(attrs, "nodes_falsenodeids", ctx),
        "true_leaf": _ints(attrs, "nodes_trueleafs", ctx),
        "false_leaf": _ints(attrs, "nodes_falseleafs", ctx),
        "missing_true": _ints(attrs, "nodes_missing_value_tracks_true", ctx, required=False),
    }
    if t["missing_true"].size == 0:
        t["missing_true"] = np.zeros(n, dtype=np.int64)
    for name, arr in t.items():
        if len(arr) != n and not (name == "splits" and np.all(modes == MEMBER)):
            raise ctx.error(f"every nodes_* attribute must have {n} entries; {name} has {len(arr)}")
    targets = _ints(attrs, "leaf_targetids", ctx)
    weights = np.asarray(attrs.get("leaf_weights"), dtype=np.float64).reshape(-1)
    if len(weights) != len(targets):
        raise ctx.error(f"leaf_weights has {len(weights)} entries but leaf_targetids {len(targets)}")
    n_targets = int(attrs.get("n_targets", 1))
    if targets.size and not (0 <= targets.min() and targets.max() < n_targets):
        raise ctx.error(f"leaf_targetids must lie in [0, {n_targets})")
    members = _member_sets(ctx, modes, attrs.get("membership_values"))
    roots = _ints(attrs, "tree_roots", ctx)
    aggregate = int(attrs.get("aggregate_function", SUM))
    rows = x2.shape[0]
    finfo = np.finfo(x.dtype)
    start = {MIN: float(finfo.max), MAX: float(finfo.min)}.get(aggregate, 0.0)
    result = np.full((rows, n_targets), start, dtype=np.float64)
    row_index = np.arange(rows)
    for root in roots:
        if not 0 <= root < n:
            raise ctx.error(f"tree root {root} is not a node index")
        leaf = _leaves(ctx, x2.astype(np.float64), int(root), t, members)
        if leaf.size and (leaf.min() < 0 or leaf.max() >= len(weights)):
            raise ctx.error("a branch points at a leaf index beyond leaf_weights")
        tid, w = targets[leaf], weights[leaf]
        if aggregate in (SUM, AVERAGE):
            np.add.at(result, (row_index, tid), w)
        elif aggregate == MIN:
            np.minimum.at(result, (row_index, tid), w)
        elif aggregate == MAX:
            np.maximum.at(result, (row_index, tid), w)
        else:
            raise ctx.error(f"aggregate_function must be 0 to 3, got {aggregate}")
    if aggregate == AVERAGE and len(roots):
        result /= len(roots)
    try:
        out = post_transform(result, int(attrs.get("post_transform", NONE)))
    except ValueError as err:
        raise ctx.error(str(err)) from None
    return [out.astype(x.dtype)]
