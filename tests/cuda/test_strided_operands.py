"""Operands read where they are (#37): the elementwise kernels, the matmul and the attention
rows' mask take device views through their strides (transposed, sliced, broadcast, flipped)
instead of contiguous copies. Each view gives the reference's bits on the contiguous data,
and the views the collapse can merge cost no copy at all; views it cannot (more dims than a
kernel walks) fall back to an exact copy and give the same bits."""
import numpy as np
import pytest

from repops.cuda.counting import counting
from repops.reference import linalg as RL
from repops.reference import math as M
from repops.reference import nn as RN
from repops.reference import prims as P

from test_emulation import operand, same  # noqa: E402  (tests/cuda)


@pytest.fixture(scope="module", params=["cuda-emu", pytest.param("cuda", marks=pytest.mark.gpu)])
def ops(request):
    from kernel_samples import backend_table  # noqa: E402  (tests/repops: see conftest.py)
    from repops.cuda.ops import Ops
    backend_table(request.param)  # built and self-checked (or skipped without a GPU)
    if request.param == "cuda":
        from repops.cuda.device import device
        return Ops(device())
    from repops.cuda.emulator import emulator
    return Ops(emulator())


def up(ops, x):
    return ops.rt.upload(np.ascontiguousarray(x))


def host(ops, x):
    return ops.rt.download(x) if ops.rt.is_device(x) else np.asarray(x)


def copies_of(ops, fn):
    """fn's result and the copy kernels of the array module it ran (counted on the emulator)."""
    if ops.rt.name != "cuda-emu":
        return fn(), None
    with counting(ops.rt, device=False, sites=False) as c:
        r = fn()
    return r, c.copies


# (name, the view of a [4, 6, 10] array, merged into a kernel's 4 dims: no copy)
VIEWS = {
    "transposed": lambda a: a.transpose(2, 0, 1),
    "sliced": lambda a: a[:, 1:5, ::3],
    "flipped": lambda a: a[::-1, :, ::-2],
    "broadcast row": lambda a: a[:1, 2:3, :],
}


REFERENCE = {"add": P.add, "fma": P.fma, "lt": P.lt, "select": P.select, "exp": M.exp, "neg": P.neg}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("prim", ["add", "fma", "lt", "select", "exp"])
def test_elementwise_views_give_the_reference_bits_without_copies(ops, prim, view):
    """x a view, y broadcast along dim 0 (stride 0), z another view; select's condition a view."""
    rng = np.random.default_rng(len(prim) * 7 + len(view))
    V = VIEWS[view]
    a, c = operand(rng, 240).reshape(4, 6, 10), operand(rng, 240).reshape(4, 6, 10)
    shape = V(a).shape
    b = operand(rng, int(np.prod(shape[1:]))).reshape((1,) + shape[1:])
    cond = rng.random((4, 6, 10)) < 0.5
    x, y, z, k = V(up(ops, a)), ops.xp.broadcast_to(up(ops, b), shape), V(up(ops, c)), V(up(ops, cond))
    hx, hy, hz, hk = V(a), np.broadcast_to(b, shape), V(c), V(cond)
    args, hargs = {"add": ((x, y), (hx, hy)), "fma": ((x, y, z), (hx, hy, hz)), "lt": ((x, y), (hx, hy)),
                   "select": ((k, x, y), (hk, hx, hy)), "exp": ((x,), (hx,))}[prim]
    got, n = copies_of(ops, lambda: ops.table()[prim](*args))
    same(host(ops, got), REFERENCE[prim].reference(*hargs))
    assert n in (None, 0), f"{prim} of a {view} view made {n} copies"


def test_more_dims_than_a_kernel_walks_fall_back_to_an_exact_copy(ops):
    """Six dims that no pair of can merge: copied contiguous (counted), same bits."""
    rng = np.random.default_rng(3)
    a = operand(rng, 2 * 3 * 2 * 3 * 2 * 3).reshape(2, 3, 2, 3, 2, 3)
    view = a.transpose(5, 3, 1, 4, 2, 0)  # every stride out of order
    got, n = copies_of(ops, lambda: ops.table()["neg"](up(ops, a).transpose(5, 3, 1, 4, 2, 0)))
    same(host(ops, got), P.neg.reference(view))
    assert n in (None, 1)


# (a view of A [M, K], a view of B [K, N]): the four load directions, general strides, misalignment
def _layouts(rng, m, k, n):
    a, b = operand(rng, m * k).reshape(m, k), operand(rng, k * n).reshape(k, n)
    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)  # stored transposed
    wide_a, wide_b = operand(rng, m * 2 * k * 2).reshape(m * 2, k * 2), operand(rng, k * 2 * n * 2).reshape(k * 2, n * 2)
    return {
        "A along k, B along n": (a, lambda x: x, b, lambda x: x),
        "A along m (transposed)": (at, lambda x: x.T, b, lambda x: x),
        "B along k (a transposed weight)": (a, lambda x: x, bt, lambda x: x.T),
        "both transposed": (at, lambda x: x.T, bt, lambda x: x.T),
        "every other element": (wide_a, lambda x: x[::2, 1::2], wide_b, lambda x: x[1::2, ::2]),
    }


@pytest.mark.parametrize("shape", [(37, 29, 53), (128, 16, 128), (5, 3, 130), (130, 40, 7), (1, 8, 1)])
def test_matmul_reads_every_layout_in_place(ops, shape):
    rng = np.random.default_rng(sum(shape))
    for label, (a, fa, b, fb) in _layouts(rng, *shape).items():
        got, n = copies_of(ops, lambda: ops.matmul(fa(up(ops, a)), fb(up(ops, b))))
        same(host(ops, got), RL.matmul.reference(fa(a), fb(b)))
        assert n in (None, 0), f"{label}: {n} copies"


def test_batched_matmul_views_in_place_and_beyond_two_batch_dims(ops):
    """Attention's layouts: q [B, T, H, d] seen as [B, H, T, d], k^T as a view, a weight
    broadcast over the batch; three batch dims that cannot merge fall back to copies."""
    rng = np.random.default_rng(11)
    q = operand(rng, 2 * 9 * 3 * 8).reshape(2, 9, 3, 8)
    k = operand(rng, 2 * 9 * 3 * 8).reshape(2, 9, 3, 8)
    w = operand(rng, 8 * 5).reshape(8, 5)
    dq, dk, dw = up(ops, q), up(ops, k), up(ops, w)
    sw = lambda x: x.swapaxes(-1, -2)  # noqa: E731
    for fn, ref, copies in (
            (lambda: ops.matmul(dq.transpose(0, 2, 1, 3), sw(dk.transpose(0, 2, 1, 3))),
             RL.matmul.reference(q.transpose(0, 2, 1, 3), sw(k.transpose(0, 2, 1, 3))), 0),
            (lambda: ops.matmul(dq.transpose(0, 2, 1, 3), dw), RL.matmul.reference(q.transpose(0, 2, 1, 3), w), 0),
            (lambda: ops.matmul(dq.reshape(2, 9, 3, 2, 4).transpose(3, 0, 2, 1, 4), sw(dk.reshape(2, 9, 3, 2, 4)
                                                                                        .transpose(0, 3, 2, 1, 4))),
             RL.matmul.reference(q.reshape(2, 9, 3, 2, 4).transpose(3, 0, 2, 1, 4),
                                 sw(k.reshape(2, 9, 3, 2, 4).transpose(0, 3, 2, 1, 4))), 2)):
        got, n = copies_of(ops, fn)
        same(host(ops, got), ref)
        assert n in (None, copies)


@pytest.mark.parametrize("mask_shape", [(9, 9), (2, 1, 9, 9), (2, 3, 1, 9)])
def test_attention_reads_a_broadcast_mask_in_place(ops, mask_shape):
    """A [T, T], [B, 1, T, T] or [B, H, 1, S] mask broadcast to the scores: the rows kernel
    reads it through its strides, forward and backward, with the reference's bits."""
    rng = np.random.default_rng(len(mask_shape))
    q, k, v, g = (operand(rng, 2 * 3 * 9 * 8).reshape(2, 3, 9, 8) for _ in range(4))
    mask = rng.random(mask_shape) < 0.3
    want_o, want_p = RN.attention.reference(q, k, v, mask, 0.35)
    (o, p), n = copies_of(ops, lambda: ops.attention(up(ops, q), up(ops, k), up(ops, v), up(ops, mask), 0.35))
    same(host(ops, o), want_o)
    same(host(ops, p), want_p)
    assert n in (None, 0)
    want = RN.attention_backward.reference(g, q, k, v, want_p, mask, 0.35)
    got = ops.attention_backward(up(ops, g), up(ops, q), up(ops, k), up(ops, v), p, up(ops, mask), 0.35)
    for x, y in zip(got, want):
        same(host(ops, x), y)


def test_a_mask_beyond_three_outer_dims_is_copied_with_the_same_bits(ops):
    rng = np.random.default_rng(21)
    q, k, v = (operand(rng, 2 * 3 * 2 * 3 * 4 * 6).reshape(2, 3, 2, 3, 4, 6) for _ in range(3))
    mask = rng.random((2, 1, 2, 1, 4, 4)) < 0.3  # outer [2, 3, 2, 3, 4]: no two of its strides merge
    want_o, want_p = RN.attention.reference(q, k, v, mask, 0.5)
    (o, p), n = copies_of(ops, lambda: ops.attention(up(ops, q), up(ops, k), up(ops, v), up(ops, mask), 0.5))
    same(host(ops, o), want_o)
    same(host(ops, p), want_p)
    assert n in (None, 1)


@pytest.mark.parametrize("backward", [False, True])
def test_rope_reads_the_head_split_view_in_place_and_copies_what_no_four_dims_describe(ops, backward):
    """q as the Llama model has it (a head-split view of the qkv product, [B, H, T, d]) with a
    [T, d/2] table: one launch, no copy; a five-dim view no collapse merges: x and the tables
    copied (3 copies), the same bits."""
    rng = np.random.default_rng(31 + backward)
    name = "rope_backward" if backward else "rope"
    qkv = operand(rng, 2 * 9 * 3 * 4 * 8).reshape(2, 9, 3, 4, 8)
    cos, sin = operand(rng, 9 * 4).reshape(9, 4), operand(rng, 9 * 4).reshape(9, 4)
    odd = operand(rng, 3 * 2 * 3 * 2 * 8).reshape(3, 2, 3, 2, 8)
    for view, tables, copies in ((lambda a: a[:, :, 1].transpose(0, 2, 1, 3), (cos, sin), 0),
                                 (lambda a: a.transpose(1, 0, 3, 2, 4), (cos[:3], sin[:3]), 3)):
        a = qkv if copies == 0 else odd
        got, n = copies_of(ops, lambda: ops.table()[name](view(up(ops, a)), *(up(ops, t) for t in tables)))
        same(host(ops, got), getattr(RN, name).reference(view(a), *tables))
        assert n in (None, copies), f"{name}: {n} copies"


def test_rope_s_spec_runs_on_device_arrays_where_a_backend_lacks_the_fused_kernel(ops):
    """The reference's kernels (neg, the lane table's copy, the products of the pairs and of
    their negative-stride swap, the adds), each on the device: the fused kernel's bits."""
    rng = np.random.default_rng(41)
    x = operand(rng, 2 * 3 * 5 * 8).reshape(2, 3, 5, 8)
    cos, sin = operand(rng, 5 * 4).reshape(5, 4), operand(rng, 5 * 4).reshape(5, 4)
    table = {k: v for k, v in ops.table().items() if k not in ("rope", "rope_backward")}
    for name in ("rope", "rope_backward"):
        with P.implementations(table):
            got = getattr(RN, name)(up(ops, x), up(ops, cos), up(ops, sin))
        same(host(ops, got), host(ops, ops.table()[name](up(ops, x), up(ops, cos), up(ops, sin))))
