"""Sample arguments for every overridable reference function (repops.reference.prims.OVERRIDABLE):
the one table the backend tests run every kernel of every backend on. Each entry: name ->
function(rng, values) -> list of argument tuples; `values(shape)` draws float32 operands of
one flavour (normal, specials, subnormal-heavy, signed zeros)."""
import numpy as np
import pytest

from repops import faults
from repops.reference import prims as P

F32 = np.float32
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38, -3.4028235e38,
                     1.0, -1.0, 0.5, 2.5, -2.5], F32)


def backend_table(name):
    """A backend's table; only the GPU may be absent (the emulator failing to build fails)."""
    from repops.backends import get
    from repops.errors import BackendError
    try:
        return get(name)
    except BackendError as e:
        if name != "cuda":
            raise
        pytest.skip(str(e))


def flavours(rng):
    """name -> values(shape): the operand flavours every kernel meets."""
    def normal(*shape):
        return (rng.standard_normal(shape) * 2).astype(F32)

    def special(*shape):
        x = normal(*shape)
        f = x.reshape(-1)
        f[::4] = SPECIALS[rng.integers(0, SPECIALS.size, f[::4].size)]
        f[1::7] = rng.integers(1, 1 << 23, f[1::7].size).astype(np.uint32).view(F32)
        if f.size > 3:
            f[3] = np.uint32(0x7FA00001).view(F32)  # a NaN with a payload
        return x

    def subnormal(*shape):
        x = normal(*shape)
        f = x.reshape(-1)
        f[::2] *= F32(2.0 ** -135)
        return x

    def signed_zero(*shape):
        x = normal(*shape)
        f = x.reshape(-1)
        f[::3] = F32(-0.0)
        f[1::3] = F32(0.0)
        return x
    return {"normal": normal, "special": special, "subnormal": subnormal, "signed_zero": signed_zero}


def _unary(rng, v):
    return [(v(1031),), (v(7, 33),), (P.const(-0.0, (5,)),), (v(3, 4)[:, ::2],)]


def _trig(rng, v):
    """_unary's, and what the reduction must get right: the inputs closest to a multiple of pi/2
    (16367173 2^72 is the closest of all binary32), either side of pi/4, every binade to 2^128."""
    worst = np.array([7.72917892e+28, 2.19993846e+10, 252.898209, 4.71238899, 52516.4, 3.4028235e38,
                      0.785398185, 0.785398125, 0.785398245, -1e10, 6400.0, 2.0 ** 24, -0.0, 1e-45], F32)
    spread = (rng.random(512) * 2 - 1) * np.exp2(rng.integers(-3, 128, 512))
    return _unary(rng, v) + [(worst,), (spread.astype(F32),)]


def _pow(rng, v):
    """_binary's, every pair of C99's special operands, and results across the range."""
    sp = F32([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -3.0, 2.5, np.inf, -np.inf, np.nan, 1e-40, 3.4028235e38])
    x = np.abs(v(600)) + F32(1e-30)
    y = (rng.uniform(-87, 88, 600) / np.log(x.astype(np.float64))).astype(F32)
    return _binary(rng, v) + [(np.repeat(sp, sp.size), np.tile(sp, sp.size)), (x, y)]


def _binary(rng, v):
    return [(v(1031), v(1031)), (v(6, 7), v(7)), (v(5, 1), F32(-0.0)), (F32(1e-45), v(9)), (v(4, 6).T, v(6, 4))]


def _ternary(rng, v):
    return [(v(257), v(257), v(257)), (v(4, 5), F32(1.5), v(5)), (v(3, 1), v(1, 4), P.const(-0.0, (3, 4)))]


def _select(rng, v):
    c = rng.integers(0, 2, 257).astype(bool)
    return [(c, v(257), v(257)), (c[:20].reshape(4, 5), F32(-0.0), v(5)), (np.bool_(True), v(9), v(9))]


def _compare(rng, v):
    a, b = v(257), v(257)
    b[::2] = a[::2]
    return [(a, b), (v(4, 5), F32(0.0)), (F32(-0.0), v(6))]


def _ldexp(rng, v):
    e = rng.integers(-300, 300, 257).astype(np.int32)
    e[:6] = [-1000, 1000, -149, 127, 128, -126]
    return [(v(257), e), (v(4, 5), np.int32(-140))]


def _to_int(rng, v):
    return [(v(257),), (np.array([2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 128, 1e10, -0.5, 2.5], F32),)]


def _from_int(rng, v):
    x = rng.integers(-2 ** 31, 2 ** 31, 257, dtype=np.int64).astype(np.int32)
    x[:4] = [0, -1, 2 ** 31 - 1, -2 ** 31]
    return [(x,)]


def _rows(rng, v):
    return [(v(7, 33), -1), (v(5, 6, 9), 1), (v(40, 1), -1), (v(3, 300), -1), (v(17, 4, 5), 0), (v(1, 1), 0)]


def _rows2(rng, v):
    return [(v(*s), v(*s), d) for s, d in (((7, 33), -1), ((5, 6, 9), 1), ((17, 4, 5), 0), ((2, 1), -1))]


def _layer_norm(rng, v):
    return [(v(6, 10), v(10), v(10), 1e-5, 1), (v(2, 3, 8), None, None, 1e-5, 1), (v(4, 3, 5), v(3, 5), None, 1e-5, 2),
            (v(50, 64), v(64), v(64), 1e-6, 1)]


def _layer_norm_backward(rng, v):
    out = []
    for x, w, b, eps, nd in _layer_norm(rng, v):
        from repops.reference.nn import layer_norm
        _, mean, rstd = layer_norm.reference(x, w, b, eps, nd)
        out.append((v(*x.shape), x, mean, rstd, w, nd, w is not None, b is not None))
    return out


def _rms_norm(rng, v):
    return [(v(6, 10), v(10), 1e-5), (v(2, 3, 8), v(8), 1e-6), (v(50, 64), v(64), 1e-5)]


def _rms_norm_backward(rng, v):
    from repops.reference.nn import rms_norm
    return [(v(*x.shape), x, w, rms_norm.reference(x, w, eps)[1]) for x, w, eps in _rms_norm(rng, v)]


def _rope(rng, v):
    """Interleaved pairs: the model's head-split view (strided x, a [T, n/2] table), tables
    broadcast per batch, an x whose rows are a transposed view, one pair, an empty batch, and
    strides no 4 dims describe (the CUDA backend's contiguous copies)."""
    heads = v(2, 7, 3, 8).transpose(0, 2, 1, 3)  # [2, 3, 7, 8], strided as q after transpose(1, 2)
    return [(heads, v(7, 4), v(7, 4)), (v(5, 6), v(5, 3), v(1, 3)), (v(1, 3, 4, 10), v(3, 4, 5), v(4, 5)),
            (v(12, 6).T, v(6), v(6, 6)),
            (v(3, 2, 3, 2, 8).transpose(1, 0, 3, 2, 4), v(3, 4), v(3, 4)), (v(2), v(1), v(1)), (v(0, 4), v(2), v(2))]


def _attention(rng, v):
    """A causal mask, none, an all-keep mask, and one with fully masked query rows (their p and o
    are +0: torch's _safe_softmax, where softmax would give NaN)."""
    mask = np.triu(np.ones((7, 7), bool), 1)
    padded = np.zeros((2, 1, 5, 6), bool)
    padded[0, 0, 1], padded[1, 0, 4], padded[1, 0, :, 5] = True, True, True  # rows 1 and 4 attend to nothing
    return [(v(2, 3, 7, 4), v(2, 3, 7, 4), v(2, 3, 7, 4), mask, 0.5), (v(1, 2, 7, 8), v(1, 2, 7, 8), v(1, 2, 7, 8), None, 0.125),
            (v(2, 5, 3), v(2, 5, 3), v(2, 5, 2), np.zeros((5, 5), bool), 1.0),
            (v(2, 3, 5, 4), v(2, 3, 6, 4), v(2, 3, 6, 4), padded, 0.5)]


def _attention_backward(rng, v):
    from repops.reference.nn import attention
    out = []
    for q, k, vv, mask, scale in _attention(rng, v):
        _, p = attention.reference(q, k, vv, mask, scale)
        out.append((v(*q.shape[:-1], vv.shape[-1]), q, k, vv, p, mask, scale))
    return out


def _adamw(rng, v):
    return [(v(n), v(n), v(n), np.abs(v(n)), np.asarray(b1t, F32), np.asarray(b2t, F32), lr, 0.9, 0.999, 1e-8, wd)
            for n, b1t, b2t, lr, wd in ((10, 1.0, 1.0, 3e-3, 0.01), (1000, 0.9, 0.999, 1e-3, 0.0), (70000, 0.5, 0.9, 0.1, 0.1))]


def _adamw_foreach(rng, v):
    """A group: sizes around the launch's thread count, an empty parameter, per-parameter b1t/b2t
    and moments; more parameters than one launch's ADAMW_SLOTS (several launches a step)."""
    def group(sizes, lr, wd):
        ps = [(v(n), v(n), v(n), np.abs(v(n)), np.asarray(rng.choice([1.0, 0.9, 0.5]), F32),
               np.asarray(rng.choice([1.0, 0.999, 0.25]), F32)) for n in sizes]
        return (*([p[k] for p in ps] for k in range(6)), lr, 0.9, 0.999, 1e-8, wd)
    return [group([10, 0, 300, 1], 3e-3, 0.01), group([int(n) for n in rng.integers(1, 70, 45)], 0.1, 0.0),
            group([70000, 3], 1e-3, 0.1), group([], 1e-3, 0.1)]


def _matmul(rng, v):
    return [(v(37, 29), v(29, 53)), (v(3, 2, 19, 11), v(2, 11, 23)), (v(7, 0), v(0, 5)), (v(8, 16), v(16, 8)),
            (v(40, 50)[::-1, 3:20], v(50, 40)[5:22, ::-2])]


def _matmul_add(rng, v):
    """addmm's bias: a row, a full matrix, one value, a column, a strided view, batched with
    a broadcast batch; a bias broadcasting the product to a larger shape (two kernels); K = 0."""
    return [(v(37, 29), v(29, 53), v(53)), (v(5, 7), v(7, 6), v(5, 6)), (v(9, 4), v(4, 130), v(1)),
            (v(9, 4), v(4, 3), v(9, 1)), (v(40, 50)[::-1, 3:20], v(50, 40)[5:22, ::-2], v(3, 40)[1, ::2]),
            (v(3, 2, 19, 11), v(2, 11, 23), v(2, 1, 23)), (v(3, 4), v(4, 5), v(2, 3, 5)), (v(7, 0), v(0, 5), v(5))]


def _fold(rng, v):
    return [(prim, v(*s), ax, init) for prim, init in ((P.add, -0.0), (P.max_, -np.inf), (P.add, 0.0), (P.max_, 1e-45))
            for s, ax in (((7,), 0), ((5, 131), 1), ((131, 5), 0), ((3, 4, 0), 2), ((4, 33, 6), 1))]


def _gather(rng, v):
    return [(v(1, 5, 3), np.array([[0, 4, 9, -1, 2]], np.int64), F32(-0.0)), (v(2, 4, 1), rng.integers(0, 4, (2, 6)),
                                                                             P.const(0.0, ()))]


def _onehot(rng, v):
    return [(np.array([2, 0, 1], np.int64), v(3), P.const(0.0, (4,))), (np.array([1, 1], np.int64), P.const(-0.0, (2,)),
                                                                        v(3))]


def _philox(rng, v):
    """Single-value operands (what dropout passes: the compiled kernels' path; thresholds at
    the ends, negative int32 words, a mask above 2^16 elements: several threads), and
    per-element thresholds (the spec's general broadcast)."""
    i32 = P.int32_word
    cases = [(i32(s), i32(k), i32(c), P.const(i32(t), shape, np.int32))
             for s, k, c, t, shape in ((1, 0, 0, 1 << 31, (7, 33)), (2 ** 24 - 1, -5, 3, 0, (1031,)),
                                       (9, 0xDEADBEEF, 0xFFFFFFFF, 0xFFFFFFFF, (3, 4, 5)), (5, 7, 1, 0x40000000, (70000,)),
                                       (0, 1, 2, 0x1999999A, (0, 3)))]
    cases.append((i32(4), i32(11), i32(0), rng.integers(-2 ** 31, 2 ** 31, (6, 9)).astype(np.int32)))
    return cases


def _integer(rng, v):
    """repops.integer.run: every compiled backend runs torch's integers natively, the reference
    the integer kernels (tests/repops/test_integers.py holds those to torch on every op)."""
    import torch
    aten = torch.ops.aten
    a = torch.from_numpy(rng.integers(-2 ** 62, 2 ** 62, (4, 5)))
    m = torch.from_numpy(rng.random((4, 5)) < 0.5)
    return [(aten.add.Tensor, (a, a[:1]), {}), (aten.remainder.Scalar, (a, -3), {}), (aten.eq.Scalar, (a, 0), {}),
            (aten.masked_fill.Scalar, (a, m, -100), {}), (aten._to_copy.default, (m,), {"dtype": torch.float32}),
            (aten.sum.dim_IntList, (m, [1]), {})]


def _embedding_backward(rng, v):
    return [(rng.integers(0, 10, 23), v(23, 6), 10), (np.array([3, 3, 3], np.int64), v(3, 5), 4),
            (np.zeros(0, np.int64), v(0, 4), 3), (rng.integers(0, 300, 500), v(500, 70), 300)]


def _index_check(rng, v):
    """faults.index_flags: clean, one bad element late, many, ignore_index among them, a
    transposed operand (strided layouts on the device: tests/cuda/test_launch_glue.py)."""
    i = rng.integers(0, 10, (5, 70))
    late, many = i.copy(), rng.integers(-3, 12, (5, 70))
    late[4, 69] = 10
    return [(i, 10, None), (late, 10, None), (many, 10, None), (many, 10, -3), (many.T, 12, None),
            (np.zeros(0, np.int64), 4, None)]


def _finite_check(rng, v):
    """faults.finite_flags: the flavour's values (specials: infinities and NaNs throughout), one
    infinity late, a NaN first, a transposed operand, empty."""
    x = v(7, 90)
    late, first = np.abs(v(7, 90)).clip(0, 1), np.zeros((3, 4), np.float32)
    late[6, 89], first[0, 0] = np.inf, np.nan
    return [(x,), (late,), (first,), (x.T,), (np.zeros(0, np.float32),)]


SAMPLES = {"embedding_backward": _embedding_backward, "index_check": _index_check, "finite_check": _finite_check,
    "add": _binary, "sub": _binary, "mul": _binary, "div": _binary, "min": _binary, "max": _binary, "fma": _ternary,
    "sqrt": _unary, "neg": _unary, "abs": _unary, "rint": _unary, "floor": _unary, "trunc": _unary, "copy": _unary,
    "eq": _compare, "lt": _compare, "le": _compare, "select": _select, "ldexp": _ldexp,
    "from_int32": _from_int, "to_int32_trunc": _to_int, "to_int32_rne": _to_int,
    "exp": _unary, "log": _unary, "sigmoid": _unary, "tanh": _unary, "erf": _unary, "sin": _trig, "cos": _trig,
    "pow": _pow,
    "silu": _unary, "gelu": _unary, "gelu_tanh": _unary, "silu_backward": _binary, "gelu_backward": _binary,
    "gelu_tanh_backward": _binary, "tanh_backward": _binary, "sigmoid_backward": _binary,
    "softmax": _rows, "log_softmax": _rows, "softmax_backward": _rows2, "log_softmax_backward": _rows2,
    "layer_norm": _layer_norm, "layer_norm_backward": _layer_norm_backward, "rms_norm": _rms_norm,
    "rms_norm_backward": _rms_norm_backward, "rope": _rope, "rope_backward": _rope, "attention": _attention, "attention_backward": _attention_backward,
    "adamw": _adamw, "adamw_foreach": _adamw_foreach, "matmul": _matmul, "matmul_add": _matmul_add, "fold": _fold, "gather": _gather, "onehot": _onehot, "philox": _philox,
    "integer": _integer,
}
# argument positions a kernel may write in place (arrays, or lists of them): pass copies
MUTATES = {"adamw": (0, 2, 3, 4, 5), "adamw_foreach": (0, 2, 3, 4, 5)}
# outputs compared through what reads them: a backend's own checks are read by first()
READS = {k: lambda flags: np.int64(-1 if (e := faults.first(flags)) is None else e) for k in ("index_check", "finite_check")}


def fresh(a):
    """A copy of a mutated argument: an array, or a list of arrays."""
    return [np.array(x, copy=True) for x in a] if isinstance(a, list) else np.array(a, copy=True)
