"""3x3 stride-1 conv2d by Winograd's minimal filtering F(m x m, 3 x 3), in NCHW[x]c.

Every m x m tile of the output is computed from an (m + 2) x (m + 2) tile of the input as

    Y = A^T [ (G g G^T) (.) (B^T d B) ] A

summed over input channels: the elementwise product (.) becomes, for each of the alpha^2
(alpha = m + 2) positions of the transformed tile, a matrix product over channels.  That takes
alpha^2 multiply-adds per tile and channel pair instead of 9 m^2: 2.25x fewer at m = 2, 4x fewer
at m = 4.  The weight transform U = G g G^T is done once, at compile time (graph pass
`alter_layout_winograd`), so the op takes U, laid out (alpha, alpha, F / B, C / groups, B).

Stages (names are what the schedule and TENSORFORGE_DEBUG show):
  pad       the zero-padded input, (N, C / b, TH * m + 2, TW * m + 2, b), TH x TW tiles;
  wino_t    B^T applied along the columns of each input tile: (N, C/b, P, alpha, alpha, b);
  wino_v    ... and along the rows: V, (N, C/b, P, alpha, alpha, b), P = TH * TW tiles, each
            tile's alpha^2 x b values contiguous;
  wino_m    the batched matrix product M[n, k, p, e, ki] = sum_c V[n, c, p, e] U[e, k, c, ki]:
            the same register-blocked micro-kernel as a 1x1 conv in NCHW[x]c (with `groups`,
            each output block sums over its group's input blocks only);
  wino_s    A^T along the columns of each product tile (alpha x m);
  output    A^T along the rows, written (N, F / B, OH, OW, B) like conv2d_nchwc.
The transforms are built from the matrices' nonzero entries only, as one expression per
position selected by the position index: the schedule unrolls those indices, so each copy is
a short constant sum.  m = 4 loses about 3 bits of float32 precision to m = 2's 1 (the
matrices hold 8 and 1/24); both stay well inside the tolerance of model-level checks.
Pattern complex-out-fusable; CPU template conv2d_winograd_nchwc.cpu
(ops/schedules/cpu_winograd.py).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import te
from .common import const_shape
from .nn_conv_nchwc import to_nchw, to_nchwc
from .nn_window import np_pad, pad_stage
from .registry import COMPLEX, OpError, TensorType, op

NAME = "conv2d_winograd_nchwc"
TILES = (2, 4)


@functools.cache
def winograd_matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T (m x alpha), G (alpha x 3), B^T (alpha x alpha)) of F(m, 3), float64, from the
    interpolation points 0, +-1, +-2 and infinity (Lavin and Gray's choice)."""
    if m == 2:
        at = [[1, 1, 1, 0], [0, 1, -1, -1]]
        g = [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]
        bt = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    elif m == 4:
        at = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
        g = [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
             [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]
        bt = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
              [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
    else:
        raise OpError(f"{NAME}: tile must be one of {TILES}, got {m}")
    return np.array(at, np.float64), np.array(g, np.float64), np.array(bt, np.float64)


def transformed_shape(wp: tuple, m: int) -> tuple:
    """The shape `transform_weight` gives packed 3x3 weights of shape `wp`: (alpha, alpha, F / B, C, B)."""
    return (m + 2, m + 2, wp[0], wp[1], wp[4])


def transform_weight(wp: np.ndarray, m: int) -> np.ndarray:
    """Packed 3x3 weights (F / B, C, 3, 3, B) -> U = G g G^T as (alpha, alpha, F / B, C, B)."""
    if wp.ndim != 5 or tuple(wp.shape[2:4]) != (3, 3):
        raise OpError(f"{NAME}: the weight transform takes (F/B, C, 3, 3, B) weights, got {wp.shape}")
    _, g, _ = winograd_matrices(m)
    t = np.tensordot(g, wp.astype(np.float64), axes=([1], [2]))      # (alpha, F/B, C, 3, B): G g
    u = np.tensordot(g, t, axes=([1], [3]))                           # (alpha, alpha, F/B, C, B): (G g) G^T
    return np.ascontiguousarray(u.transpose(1, 0, 2, 3, 4).astype(wp.dtype))


def _geometry(data: tuple, u: tuple, padding, tile, data_layout, groups=1):
    """Checked attributes: (m, alpha, block in, (pt, pl), (oh, ow), (th, tw))."""
    m, alpha = checked_tile(NAME, tile)
    if len(data) != 5:
        raise OpError(f"{NAME}: data must be blocked (N, C/b, H, W, b), got shape {tuple(data)}")
    if data_layout != f"NCHW{data[4]}c":
        raise OpError(f"{NAME}: data_layout {data_layout!r} does not match data of shape {tuple(data)}")
    g = int(groups)
    if g < 1 or data[1] % g or (len(u) == 5 and u[2] % g):
        raise OpError(f"{NAME}: {groups} groups must split both the {data[1]} input blocks and the output "
                      f"blocks of the transformed weight {tuple(u)}")
    per_group = data[1] * data[4] // g
    if len(u) != 5 or tuple(u[:2]) != (alpha, alpha) or u[3] != per_group:
        raise OpError(f"{NAME}: transformed weight must be ({alpha}, {alpha}, F/B, {per_group}, B) "
                      f"for tile {m}, got {tuple(u)}")
    p, (oh, ow) = padded_output(NAME, padding, data[2], data[3])
    return m, alpha, data[4], (p[0], p[1]), (oh, ow), (-(-oh // m), -(-ow // m))


def checked_tile(name: str, tile) -> tuple[int, int]:
    """(m, alpha = m + 2) of an F(m x m, 3 x 3) tile; OpError naming `name` for another size."""
    m = int(tile)
    if m not in TILES:
        raise OpError(f"{name}: tile must be one of {TILES}, got {tile!r}")
    return m, m + 2


def padded_output(name: str, padding, h: int, w: int) -> tuple:
    """(padding as 4 ints, (OH, OW)) of a 3x3 stride-1 conv on an h x w input; OpError naming
    `name` for a bad padding or a window larger than the padded input."""
    p = tuple(int(v) for v in padding)
    if len(p) != 4 or any(v < 0 for v in p):
        raise OpError(f"{name}: padding must be 4 non-negative values (top, left, bottom, right), got {padding}")
    oh, ow = h + p[0] + p[2] - 2, w + p[1] + p[3] - 2
    if oh <= 0 or ow <= 0:
        raise OpError(f"{name}: the 3x3 window is larger than the padded input")
    return p, (oh, ow)


def _combine(coeffs, terms):
    """sum_i coeffs[i] * terms[i] over the nonzero coefficients (1 and -1 without a multiply)."""
    acc = None
    for c, t in zip(coeffs, terms):
        c = float(c)
        if c == 0:
            continue
        if acc is None:
            acc = t if c == 1 else (-t if c == -1 else t * te.const(c, t.dtype))
        elif c == 1:
            acc = acc + t
        elif c == -1:
            acc = acc - t
        else:
            acc = acc + t * te.const(c, t.dtype)
    return acc


def _pick(index, exprs):
    """exprs[index] for a loop index: a select chain that folds to one expression once the
    schedule unrolls `index`."""
    out = exprs[-1]
    for k in range(len(exprs) - 2, -1, -1):
        out = te.if_then_else(index == k, exprs[k], out)
    return out


@op(NAME, COMPLEX, schedule={"cpu": "conv2d_winograd_nchwc.cpu"}, attr_defaults={"padding": (0, 0, 0, 0)})
class conv2d_winograd_nchwc:
    @staticmethod
    def infer(data: TensorType, u: TensorType, tile=4, padding=(0, 0, 0, 0), data_layout="NCHW16c", groups=1):
        if data.dtype != u.dtype:
            raise OpError(f"{NAME}: dtypes differ ({data.dtype} and {u.dtype})")
        *_, (oh, ow), _ = _geometry(tuple(data.shape), tuple(u.shape), padding, tile, data_layout, groups)
        return TensorType((data.shape[0], u.shape[2], oh, ow, u.shape[4]), data.dtype)

    @staticmethod
    def compute(data: te.Tensor, u: te.Tensor, tile=4, padding=(0, 0, 0, 0), data_layout="NCHW16c", groups=1):
        dshape, ushape = const_shape(data), const_shape(u)
        m, alpha, bi, before, (oh, ow), (th, tw) = _geometry(dshape, ushape, padding, tile, data_layout, groups)
        n, cb = dshape[:2]
        kb, c, b = ushape[2:]
        at, _, bt = winograd_matrices(m)
        ntiles = th * tw
        padded = pad_stage(data, (*before, 0), (th * m + 2, tw * m + 2, bi))

        def t_body(i, ci_, p, a, nu, ci):
            y0, x0 = (p // tw) * m + a, (p % tw) * m
            return _pick(nu, [_combine(bt[v], [padded[i, ci_, y0, x0 + k, ci] for k in range(alpha)])
                              for v in range(alpha)])
        t = te.compute((n, cb, ntiles, alpha, alpha, bi), t_body, name="wino_t")

        def v_body(i, ci_, p, eps, nu, ci):
            return _pick(eps, [_combine(bt[e], [t[i, ci_, p, a, nu, ci] for a in range(alpha)])
                               for e in range(alpha)])
        v = te.compute((n, cb, ntiles, alpha, alpha, bi), v_body, name="wino_v")

        g = int(groups)
        rco = te.reduce_axis((0, cb // g), name="rco")
        rci = te.reduce_axis((0, bi), name="rci")

        def in_block(k):
            """The input block rco of output block k's group."""
            return (k // (kb // g)) * (cb // g) + rco if g > 1 else rco
        mm = te.compute(
            (n, kb, ntiles, alpha, alpha, b),
            lambda i, k, p, eps, nu, ki: te.sum(v[i, in_block(k), p, eps, nu, rci] * u[eps, nu, k, rco * bi + rci, ki],
                                                axis=[rco, rci]),
            name="wino_m", tag="wino_m")

        def s_body(i, k, p, eps, j, ki):
            return _pick(j, [_combine(at[jj], [mm[i, k, p, eps, nu, ki] for nu in range(alpha)])
                             for jj in range(m)])
        s = te.compute((n, kb, ntiles, alpha, m, b), s_body, name="wino_s")

        def y_body(i, k, y, x, ki):
            p, j = (y // m) * tw + x // m, x % m
            return _pick(y % m, [_combine(at[r], [s[i, k, p, e, j, ki] for e in range(alpha)]) for r in range(m)])
        return te.compute((n, kb, oh, ow, b), y_body, name=NAME, tag=NAME)

    @staticmethod
    def reference(data, u, tile=4, padding=(0, 0, 0, 0), data_layout="NCHW16c", groups=1):
        return winograd_reference(data, u, int(tile), padding, data_layout, int(groups))


def winograd_reference(data: np.ndarray, u: np.ndarray, m: int, padding, data_layout: str,
                       groups: int = 1) -> np.ndarray:
    """NumPy Winograd conv on any transformed weight `u` (float64 inside): tiles of the padded
    input, V = B^T d B, M = sum over channels of U (.) V, Y = A^T M A, cropped.  With groups,
    each group's input blocks and output blocks are a Winograd conv of their own."""
    m, alpha, bi, before, (oh, ow), (th, tw) = _geometry(data.shape, u.shape, padding, m, data_layout, groups)
    if groups > 1:
        cbg, kbg = data.shape[1] // groups, u.shape[2] // groups
        return np.concatenate([winograd_reference(data[:, g * cbg:(g + 1) * cbg], u[:, :, g * kbg:(g + 1) * kbg],
                                                  m, padding, data_layout) for g in range(groups)], axis=1)
    at, _, bt = winograd_matrices(m)
    xp = np_pad(to_nchw(data).astype(np.float64), before, (th * m + 2, tw * m + 2), 0.0)
    n, c = xp.shape[:2]
    rows = np.arange(th)[:, None] * m + np.arange(alpha)[None, :]          # (th, alpha)
    cols = np.arange(tw)[:, None] * m + np.arange(alpha)[None, :]
    d = xp[:, :, rows[:, None, :, None], cols[None, :, None, :]]            # (n, c, th, tw, alpha, alpha)
    v = np.einsum("ea,nctuab,fb->nctuef", bt, d, bt, optimize=True)
    kb, _, b = u.shape[2:]
    uu = u.astype(np.float64).transpose(0, 1, 2, 4, 3).reshape(alpha, alpha, kb * b, c)
    mm = np.einsum("efkc,nctuef->nktuef", uu, v, optimize=True)
    y = np.einsum("ie,nktuef,jf->nktiuj", at, mm, at, optimize=True)       # (n, k, th, m, tw, m)
    y = y.reshape(n, kb * b, th * m, tw * m)[:, :, :oh, :ow]
    return to_nchwc(y.astype(data.dtype), b)
