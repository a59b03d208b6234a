"""The block-per-row kernels (repops/cuda/kernels/block.cuh: softmax family, attention rows,
layer/RMS norm and their column sums, fold) on the emulator, bit for bit against the
reference, under geometries that take every path: rows longer than the block and than the
shared-memory stage and not a multiple of either, one element, empty, a block wider than
the stage, grids smaller than the rows (block-stride), one to four columns per block.
Specials, subnormals, -0.0 and NaN payloads in the operands."""
import numpy as np
import pytest

from repops.cuda.emulator import Emulator
from repops.cuda.ops import Ops
from repops.reference import nn as R
from repops.reference import prims as P
from repops.reference.fold import fold as ref_fold

from test_emulation import operand, same  # noqa: E402

F32 = np.float32


@pytest.fixture(scope="module", params=["default", "stage40", "wide", "h100"])
def ops(request):
    """default: the emulator's geometry (32 threads, 2 blocks, a 1024-float stage); stage40:
    a stage of 40 floats (chunks not a multiple of the 32-thread block); wide: 64 threads
    over that stage and 3 blocks; h100: the GPU's 256 threads and a block per row."""
    if request.param == "default":
        return Ops(Emulator())
    if request.param == "h100":
        from repops.cuda.device import Device
        rt = Emulator()
        rt.row_threads, rt.elementwise_threads, rt.max_blocks = Device.row_threads, Device.elementwise_threads, 32 * 132
        return Ops(rt)
    rt = Emulator(tuning={"REPOPS_STAGE": 40})
    if request.param == "wide":
        rt.row_threads, rt.max_blocks = 64, 3
    return Ops(rt)


def data(rng, *shape):
    n = int(np.prod(shape))
    return operand(rng, n).reshape(shape) if n else np.zeros(shape, F32)


# (0, n) and the non-last dims of (3, 0) are left out: the reference's fold_dims cannot
# reshape a zero-size array with -1 (a ValueError in repops/reference/fold.py)
SHAPES = [(1, 1), (3, 1), (2, 31), (2, 33), (4, 100), (2, 257), (3, 0), (5, 7, 3)]


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_family(ops, shape):
    rng = np.random.default_rng(sum(shape) + len(shape))
    x, g = data(rng, *shape), data(rng, *shape)
    for dim in {-1} if 0 in shape else {-1, 0, len(shape) // 2}:
        y = R.softmax.reference(x, dim)
        same(ops.softmax(x, dim), y)
        same(ops.log_softmax(x, dim), R.log_softmax.reference(x, dim))
        same(ops.softmax_backward(g, y, dim), R.softmax_backward.reference(g, y, dim))
        ly = R.log_softmax.reference(x, dim)
        same(ops.log_softmax_backward(g, ly, dim), R.log_softmax_backward.reference(g, ly, dim))


def test_a_row_sum_keeps_the_sequential_order(ops):
    """2^24 then ones: in order each +1 ties back to 2^24; any split of the row (per thread,
    per chunk, a tree) adds ones together first and ends higher."""
    for n in (100, 1031):
        g = np.ones((3, n), F32)
        g[:, 0] = F32(2.0 ** 24)
        y = np.zeros((3, n), F32)
        assert R.log_softmax_backward.reference(g, y, -1)[0, 1] == F32(1.0) - F32(2.0 ** 24)
        same(ops.log_softmax_backward(g, y, -1), R.log_softmax_backward.reference(g, y, -1))


@pytest.mark.parametrize("shape", [(2, 5, 33), (1, 2, 1, 100), (2, 1, 3, 3)])
def test_attention_rows(ops, shape):
    rng = np.random.default_rng(len(shape) + shape[-1])
    *b, s, d = shape
    q, k, v, g = (data(rng, *shape) for _ in range(4))
    mask = np.triu(np.ones((s, s), bool), 1)
    scale = F32(d ** -0.5)
    out, p = ops.attention(q, k, v, mask, scale)
    want_out, want_p = R.attention.reference(q, k, v, mask, scale)
    same(p, want_p)
    same(out, want_out)
    for got, want in zip(ops.attention_backward(g, q, k, v, want_p, mask, scale),
                         R.attention_backward.reference(g, q, k, v, want_p, mask, scale)):
        same(got, want)


@pytest.mark.parametrize("rows,n", [(1, 1), (3, 1), (140, 3), (2, 33), (4, 100), (3, 300), (3, 600)])
def test_norms_and_their_column_sums(ops, rows, n):
    """n = 300 / 600: two / four columns per block in the column sums; 140 rows: more rows
    than blocks. (No empty rows: the reference cannot take them, see SHAPES.)"""
    rng = np.random.default_rng(rows * 1000 + n)
    x, go, w, b = data(rng, rows, n), data(rng, rows, n), data(rng, n), data(rng, n)
    eps = 1e-5
    for ww, bb in ((w, b), (None, None)):
        y, mean, rstd = ops.layer_norm(x, ww, bb, eps, 1)
        want = R.layer_norm.reference(x, ww, bb, eps, 1)
        for got_t, want_t in zip((y, mean, rstd), want):
            same(got_t, want_t)
        got = ops.layer_norm_backward(go, x, want[1], want[2], ww, 1, True, True)
        for got_t, want_t in zip(got, R.layer_norm_backward.reference(go, x, want[1], want[2], ww, 1, True, True)):
            same(got_t, want_t)
    y, r = ops.rms_norm(x, w, eps)
    want_y, want_r = R.rms_norm.reference(x, w, eps)
    same(y, want_y)
    same(r, want_r)
    for got_t, want_t in zip(ops.rms_norm_backward(go, x, w, want_r), R.rms_norm_backward.reference(go, x, w, want_r)):
        same(got_t, want_t)


@pytest.mark.parametrize("shape,axis", [((70, 600), 0), ((70, 300), 0), ((5, 10), 0), ((257,), 0), ((3, 41, 2), 1),
                                        ((1, 1), 1), ((0, 3), 0)])
def test_fold_columns(ops, shape, axis):
    rng = np.random.default_rng(sum(shape) + axis)
    x = data(rng, *shape)
    for prim, init in ((P.add, -0.0), (P.add, 1e-45), (P.max_, float("-inf")), (P.max_, -0.0)):
        same(ops.fold(prim, x, axis, init), ref_fold.reference(prim, x, axis, init))


@pytest.mark.parametrize("P_,D,V", [(1, 1, 1), (100, 5, 7), (70, 300, 11), (33, 40, 3), (5, 3, 2), (0, 4, 3)])
def test_embedding_backward(ops, P_, D, V):
    """Positions in chunks longer than the block, repeated rows summed in order, indices outside
    the table, non-finite entries poisoning (one row's, two rows', an outside index's); one
    table row per block (V <= max_blocks) and several, V not a multiple of them; D = 300:
    two columns per block in the poison summary."""
    rng = np.random.default_rng(P_ + D + V)
    index = rng.integers(0, min(V, 4) if P_ > 50 else V, P_).astype(np.int64)  # few rows: long chains
    g = data(rng, P_, D)
    cases = [(index, np.nan_to_num(g, nan=1.0, posinf=2.0, neginf=-2.0))]  # finite
    if P_ > 3:
        g1 = cases[0][1].copy()
        g1[2, 0] = np.inf
        g1[3, D - 1] = np.uint32(0x7FA00001).view(F32)  # a NaN payload
        cases.append((index, g1))  # S_d of one row
        g2 = g1.copy()
        if index[4] == index[2]:
            index = index.copy()
            index[4] = (index[2] + 1) % V
        g2[4, 0] = -np.inf
        cases.append((index, g2))  # S_0 of two rows, when V > 1
        out = index.copy()
        out[1] = V + 5  # outside the table: adds nothing, its non-finite entry poisons every row
        g3 = cases[0][1].copy()
        g3[1, D // 2] = np.nan
        cases.append((out, g3))
    cases.append((index, g))
    for idx, gg in cases:
        same(ops.embedding_backward(idx, gg, V), R.embedding_backward.reference(idx, gg, V))


def test_no_narrow_launch_at_the_benchmarks_shapes():
    """At the GPU's geometry (repops/cuda/counting.py), the row kernels of a d1024 Llama step
    (2048 rows of 1024, attention rows of 512, a 32,000 vocabulary, 1024 columns summed over
    2048 rows; fewer rows here, still over 132) launch >= 132 blocks where one thread per row
    or column launched 4 to 16; a fold to few outputs is the allow-list's. Kernels are stubbed:
    only the glue's geometry is looked at."""
    from repops.cuda.counting import counting
    rt = Emulator()
    ops = Ops(rt)
    x, w = np.zeros((2048, 1024), F32), np.zeros(1024, F32)
    stat = np.zeros((2048, 1), F32)
    with counting(rt, device=False, stub=True, sites=False) as c:
        ops.layer_norm(x, w, w, 1e-5, 1)
        ops.layer_norm_backward(x, x, stat, stat, w, 1, True, True)
        ops.rms_norm(x, w, 1e-6)
        ops.rms_norm_backward(x, x, w, stat)
        ops.softmax(np.zeros((1024, 512), F32), -1)
        ops.log_softmax(np.zeros((256, 32000), F32), -1)
        ops.fold(P.add, x, 0, -0.0)
        ops.embedding_backward(np.zeros(2048, np.int64), x, 32000)
    assert c.launches == 11 and c.narrow == 0, dict(c.sites.get("narrow", {}))
    with counting(rt, device=False, stub=True, sites=False) as c:
        ops.fold(P.add, np.zeros((256, 10), F32), 0, -0.0)
    assert (c.narrow, c.allowed) == (0, 1)
