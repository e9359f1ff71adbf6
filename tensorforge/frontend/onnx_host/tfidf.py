"""TfIdfVectorizer (opset 9) on the host, for int32/int64 or string input.

The pool holds the n-grams to count, all 1-grams first, then all 2-grams, and so on:
`ngram_counts[k]` is the pool position where the (k+1)-grams start, and the i-th n-gram of the
pool is counted into output coordinate `ngram_indexes[i]`.  For each row of X, and each n from
min_gram_length to max_gram_length, every n-gram whose consecutive items are `skip + 1` apart
(skip from 0 to max_skip_count; 1-grams once, they have no gaps) and that lies inside the row is
looked up in the pool; found ones add 1 to their coordinate.  Mode TF keeps the counts, IDF
turns every nonzero count into 1 and scales by `weights`, TFIDF scales the counts by `weights`.
Y is float32, [max(ngram_indexes) + 1] for a 1-D X and [N, that] for a 2-D one.
"""
from __future__ import annotations

import numpy as np

from . import HostContext, host_op
from .strings import as_strings


def _numbered(ctx: HostContext, attrs: dict, strings: bool) -> list[tuple]:
    """The pool's n-grams (tuples of items) in pool order: the i-th is counted into
    ngram_indexes[i] and scaled by weights[i]."""
    pool_s, pool_i = attrs.get("pool_strings"), attrs.get("pool_int64s")
    if (pool_s is None) == (pool_i is None):
        raise ctx.error("exactly one of pool_strings and pool_int64s must be set")
    if strings != (pool_s is not None):
        raise ctx.error("a string input needs pool_strings, an integer input pool_int64s")
    pool = list(pool_s) if pool_s is not None else [int(v) for v in (pool_i or ())]
    starts = [int(c) for c in attrs.get("ngram_counts", ())]
    if not starts:
        raise ctx.error("the 'ngram_counts' attribute is required")
    bounds = starts + [len(pool)]
    grams = []
    for k in range(len(starts)):
        n, lo, hi = k + 1, bounds[k], bounds[k + 1]
        if not 0 <= lo <= hi <= len(pool) or (hi - lo) % n:
            raise ctx.error(f"ngram_counts {starts} does not split a pool of {len(pool)} items into {n}-grams")
        grams += [tuple(pool[p:p + n]) for p in range(lo, hi, n)]
    return grams


@host_op("TfIdfVectorizer")
def tfidf_vectorizer(ctx, inputs, attrs):
    x = np.asarray(inputs[0])
    strings = x.dtype.kind in "OUS"
    if strings:
        x = as_strings(ctx, x, "X")
    elif x.dtype.kind not in "iu":
        raise ctx.error(f"X must be an int32, int64 or string tensor, got dtype {x.dtype.name}")
    if x.ndim not in (1, 2):
        raise ctx.error(f"X must be 1-D or 2-D, got shape {list(x.shape)}")
    mode = str(attrs.get("mode", "TF")).upper()
    if mode not in ("TF", "IDF", "TFIDF"):
        raise ctx.error(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    lo, hi = int(attrs.get("min_gram_length", 1)), int(attrs.get("max_gram_length", 1))
    max_skip = int(attrs.get("max_skip_count", 0))
    if not 1 <= lo <= hi or max_skip < 0:
        raise ctx.error(f"need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got "
                        f"{lo}, {hi}, {max_skip}")
    numbered = _numbered(ctx, attrs, strings)
    indexes = [int(i) for i in attrs.get("ngram_indexes", ())]
    if len(indexes) != len(numbered):
        raise ctx.error(f"ngram_indexes has {len(indexes)} entries for {len(numbered)} pool n-grams")
    weights = np.asarray(attrs.get("weights", np.ones(len(indexes))), dtype=np.float64).reshape(-1)
    if len(weights) != len(indexes):
        raise ctx.error(f"weights has {len(weights)} entries for {len(indexes)} pool n-grams")
    lookup: dict[tuple, list[int]] = {}
    for ordinal, gram in enumerate(numbered):
        if lo <= len(gram) <= hi:
            lookup.setdefault(gram, []).append(ordinal)
    width = max(indexes) + 1 if indexes else 0
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    counts = np.zeros((rows.shape[0], len(indexes)), dtype=np.float64)
    for r, row in enumerate(rows):
        items = [int(v) for v in row] if not strings else list(row)
        for n in range(lo, hi + 1):
            for skip in range(max_skip + 1 if n > 1 else 1):
                step = skip + 1
                for start in range(len(items) - (n - 1) * step):
                    for ordinal in lookup.get(tuple(items[start:start + (n - 1) * step + 1:step]), ()):
                        counts[r, ordinal] += 1
    if mode == "IDF":
        counts = np.minimum(counts, 1.0) * weights
    elif mode == "TFIDF":
        counts = counts * weights
    y = np.zeros((rows.shape[0], width), dtype=np.float64)
    for ordinal, coord in enumerate(indexes):
        y[:, coord] += counts[:, ordinal]
    return [(y[0] if x.ndim == 1 else y).astype(np.float32)]
