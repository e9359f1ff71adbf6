"""TfIdfVectorizer on the host: against a direct count of the pool's n-grams in each row."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_host_helpers import run, strings

F = TensorProto.FLOAT


def count_ngrams(row: list, gram: tuple, max_skip: int) -> int:
    """How often `gram` occurs in `row` with its items 1 + skip apart, skip in [0, max_skip]
    (a 1-gram once per position)."""
    n = len(gram)
    skips = range(max_skip + 1) if n > 1 else [0]
    return sum(tuple(row[s:s + (n - 1) * (k + 1) + 1:k + 1]) == gram
               for k in skips for s in range(len(row) - (n - 1) * (k + 1)))


def vectorize(x, mode="TF", lo=1, hi=2, max_skip=0, pool=None, counts=None, indexes=None, weights=None):
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=max_skip,
                 ngram_counts=counts, ngram_indexes=indexes)
    attrs["pool_strings" if isinstance(pool[0], str) else "pool_int64s"] = pool
    if weights is not None:
        attrs["weights"] = weights
    return run([helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)], {"x": x}, {"y": F}, opsets={"": 9})[0]


POOL = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7]            # 1-grams 2 3 5 4; 2-grams (5,6) (7,8) (6,7)
GRAMS = [(2,), (3,), (5,), (4,), (5, 6), (7, 8), (6, 7)]
INDEXES = [6, 0, 1, 2, 3, 4, 5]                  # output coordinate of each pool n-gram
WEIGHTS = [0.5, 1.0, 2.0, 1.5, 0.25, 3.0, 1.0]


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("lo,hi,max_skip", [(1, 1, 0), (1, 2, 0), (2, 2, 3), (1, 2, 5)])
def test_tfidf_int_rows_against_direct_count(mode, lo, hi, max_skip):
    x = np.random.default_rng(lo * 10 + hi + max_skip).integers(2, 9, size=(3, 12)).astype(np.int32)
    y = vectorize(x, mode, lo, hi, max_skip, POOL, [0, 4], INDEXES, WEIGHTS)
    assert y.dtype == np.float32 and y.shape == (3, 7)
    want = np.zeros((3, 7))
    for r, row in enumerate(x.tolist()):
        for i, gram in enumerate(GRAMS):
            if lo <= len(gram) <= hi:
                c = count_ngrams(row, gram, max_skip)
                want[r, INDEXES[i]] = {"TF": c, "IDF": min(c, 1) * WEIGHTS[i], "TFIDF": c * WEIGHTS[i]}[mode]
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_tfidf_string_1d_input():
    words = "the cat sat on the mat the cat".split()
    pool = ["cat", "the", "mat", "the", "cat", "cat", "sat"]
    y = vectorize(strings(*words), "TF", 1, 2, 1, pool, [0, 3], [0, 1, 2, 3, 4])
    # 1-grams cat 2, the 3, mat 1; 2-grams (the, cat) 2 adjacent + 0 with one skip, (cat, sat) 1
    np.testing.assert_array_equal(y, np.array([2, 3, 1, 2, 1], np.float32))
    assert y.shape == (5,)


def test_tfidf_checks_its_attributes():
    with pytest.raises(ValueError, match="a string input needs pool_strings, an integer input pool_int64s"):
        vectorize(strings("a"), "TF", 1, 1, 0, [1, 2], [0], [0, 1])
    with pytest.raises(ValueError, match=r"ngram_counts \[0, 3\] does not split a pool of 4 items into 2-grams"):
        vectorize(np.array([1, 2], np.int64), "TF", 1, 2, 0, [1, 2, 3, 4], [0, 3], [0, 1, 2, 3])


def test_count_helper_sees_skips():
    """The reference count itself: (1, 2) with one skip is found at 1-9-2 and at 1-2."""
    assert count_ngrams([1, 9, 2, 1, 2], (1, 2), 1) == 2 and count_ngrams([1, 9, 2], (1, 2), 0) == 0
