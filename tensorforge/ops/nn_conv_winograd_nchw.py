"""3x3 stride-1 conv2d by Winograd's minimal filtering F(m x m, 3 x 3) in plain NCHW, the form
the GPU templates use (ops/schedules/gpu_winograd.py; the CPU form on blocked data is
ops/nn_conv_winograd.py, which explains the algorithm and holds the matrices).

The tiles of all images are one axis P = N * TH * TW, so the channel sums of every tile
position are one batched matrix product over alpha^2 positions:

  pad       the zero-padded input (N, C, TH * m + 2, TW * m + 2);
  wino_t    B^T along the columns of each input tile: (alpha, alpha, C, P)  [row a, column nu];
  wino_v    ... and along the rows: V = B^T d B, (alpha, alpha, C, P);
  wino_m    M[e, nu, k, p] = sum_c U[e, nu, c, k] V[e, nu, c, p]: alpha^2 (K x C) x (C x P) products;
  wino_s    A^T along the columns of each product tile: (K, P, alpha, m);
  wino_y    ... and along the rows: the m x m output tile of (k, p), (K, P, m, m);
  output    the tiles cropped into (N, K, OH, OW).

U = G g G^T is computed once, at compile time (graph pass alter_layout_winograd_nchw), laid out
(alpha, alpha, C, K) so the product reads both operands along c at a fixed (e, nu).
Pattern complex-out-fusable; GPU template conv2d_winograd_nchw.gpu.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import const_shape
from .nn_conv_winograd import _combine, _pick, checked_tile, padded_output, winograd_matrices
from .nn_window import np_pad, pad_stage
from .registry import COMPLEX, OpError, TensorType, op

NAME = "conv2d_winograd_nchw"


def transform_weight_nchw(w: np.ndarray, m: int) -> np.ndarray:
    """3x3 weights (K, C, 3, 3) -> U = G g G^T as (alpha, alpha, C, K)."""
    if w.ndim != 4 or tuple(w.shape[2:]) != (3, 3):
        raise OpError(f"{NAME}: the weight transform takes (K, C, 3, 3) weights, got {w.shape}")
    _, g, _ = winograd_matrices(m)
    u = np.einsum("ea,kcab,fb->efck", g, w.astype(np.float64), g, optimize=True)
    return np.ascontiguousarray(u.astype(w.dtype))


def _geometry(data: tuple, u: tuple, padding, tile):
    """Checked attributes: (m, alpha, (pt, pl), (oh, ow), (th, tw))."""
    m, alpha = checked_tile(NAME, tile)
    if len(data) != 4:
        raise OpError(f"{NAME}: data must be NCHW, got shape {tuple(data)}")
    if len(u) != 4 or tuple(u[:2]) != (alpha, alpha) or u[2] != data[1]:
        raise OpError(f"{NAME}: transformed weight must be ({alpha}, {alpha}, {data[1]}, K) for tile {m}, "
                      f"got {tuple(u)}")
    p, (oh, ow) = padded_output(NAME, padding, data[2], data[3])
    return m, alpha, (p[0], p[1]), (oh, ow), (-(-oh // m), -(-ow // m))


@op(NAME, COMPLEX, schedule={"gpu": "conv2d_winograd_nchw.gpu"}, attr_defaults={"padding": (0, 0, 0, 0)})
class conv2d_winograd_nchw:
    @staticmethod
    def infer(data: TensorType, u: TensorType, tile=4, padding=(0, 0, 0, 0)):
        if data.dtype != u.dtype or data.dtype != "float32":
            raise OpError(f"{NAME}: takes float32 data and weight, got {data.dtype} and {u.dtype}")
        *_, (oh, ow), _ = _geometry(tuple(data.shape), tuple(u.shape), padding, tile)
        return TensorType((data.shape[0], u.shape[3], oh, ow), data.dtype)

    @staticmethod
    def compute(data: te.Tensor, u: te.Tensor, tile=4, padding=(0, 0, 0, 0)):
        dshape, ushape = const_shape(data), const_shape(u)
        m, alpha, before, (oh, ow), (th, tw) = _geometry(dshape, ushape, padding, tile)
        n, c = dshape[:2]
        k_out = ushape[3]
        at, _, bt = winograd_matrices(m)
        ntiles = n * th * tw
        padded = pad_stage(data, before, (th * m + 2, tw * m + 2))

        def t_body(a, nu, ci, p):
            img, q = p // (th * tw), p % (th * tw)
            y0, x0 = (q // tw) * m + a, (q % tw) * m
            return _pick(nu, [_combine(bt[v], [padded[img, ci, y0, x0 + j] for j in range(alpha)])
                              for v in range(alpha)])
        t = te.compute((alpha, alpha, c, ntiles), t_body, name="wino_t")

        def v_body(eps, nu, ci, p):
            return _pick(eps, [_combine(bt[e], [t[a, nu, ci, p] for a in range(alpha)]) for e in range(alpha)])
        v = te.compute((alpha, alpha, c, ntiles), v_body, name="wino_v")

        rc = te.reduce_axis((0, c), name="rc")
        mm = te.compute((alpha, alpha, k_out, ntiles),
                        lambda eps, nu, k, p: te.sum(u[eps, nu, rc, k] * v[eps, nu, rc, p], axis=rc),
                        name="wino_m", tag="wino_m")

        def s_body(k, p, eps, j):
            return _pick(j, [_combine(at[jj], [mm[eps, nu, k, p] for nu in range(alpha)]) for jj in range(m)])
        s = te.compute((k_out, ntiles, alpha, m), s_body, name="wino_s")

        def y_body(k, p, i, j):
            return _pick(i, [_combine(at[ii], [s[k, p, e, j] for e in range(alpha)]) for ii in range(m)])
        y = te.compute((k_out, ntiles, m, m), y_body, name="wino_y")

        def out_body(img, k, row, col):
            p = img * (th * tw) + (row // m) * tw + col // m
            return y[k, p, row % m, col % m]
        return te.compute((n, k_out, oh, ow), out_body, name=NAME, tag=NAME)

    @staticmethod
    def reference(data, u, tile=4, padding=(0, 0, 0, 0)):
        return winograd_reference_nchw(data, u, int(tile), padding)


def winograd_reference_nchw(data: np.ndarray, u: np.ndarray, m: int, padding) -> np.ndarray:
    """NumPy Winograd conv on any transformed weight `u` (alpha, alpha, C, K), float64 inside."""
    m, alpha, before, (oh, ow), (th, tw) = _geometry(data.shape, u.shape, padding, m)
    at, _, bt = winograd_matrices(m)
    xp = np_pad(data.astype(np.float64), before, (th * m + 2, tw * m + 2), 0.0)
    rows = np.arange(th)[:, None] * m + np.arange(alpha)[None, :]
    cols = np.arange(tw)[:, None] * m + np.arange(alpha)[None, :]
    d = xp[:, :, rows[:, None, :, None], cols[None, :, None, :]]            # (n, c, th, tw, alpha, alpha)
    v = np.einsum("ea,nctuab,fb->nctuef", bt, d, bt, optimize=True)
    mm = np.einsum("efck,nctuef->nktuef", u.astype(np.float64), v, optimize=True)
    y = np.einsum("ie,nktuef,jf->nktiuj", at, mm, at, optimize=True)       # (n, k, th, m, tw, m)
    n, k = y.shape[:2]
    return y.reshape(n, k, th * m, tw * m)[:, :, :oh, :ow].astype(data.dtype)
