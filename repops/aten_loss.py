"""nll_loss (and so cross_entropy) on RepOps: 1-D, 2-D and N-D inputs ([N, C, d1, ...], torch's
nll_loss2d), class weights, an ignore_index that is a class (docs/NUMERICS.md §8, "Transposed
convolution and losses with classes"). Rows are the (n, d...) positions in row-major order,
torch's order; each row's log-probability and class weight are picked by the gather kernel.

Unweighted 2-D input with an ignore_index outside the classes keeps the kernel sequence it
always had (a job's decomposition names its kernels by position)."""
from __future__ import annotations

import numpy as np
import torch

from . import faults
from .aten import EXACT, _indices, arr, np_, register, tt
from .errors import UnsupportedOpError
from .torch_checks import checked
from .reference import integers as I
from .reference import distance as D
from .reference import embedding_bag as EB
from .reference import linear_ce as LCE
from .reference import margin as M
from .reference import prims as P
from .reference.fold import sum_dims

aten = torch.ops.aten
F32 = np.float32
_NONE, _MEAN, _SUM = 0, 1, 2


def _rows(a, op):
    """x [C], [N, C] or [N, C, d1, ...] as [R, C] rows in torch's order (n, d...): a view, or
    the copy kernel of the class axis moved last."""
    x = np_(a, op)
    if x.ndim <= 2:
        return x.reshape(-1, x.shape[-1]) if x.ndim == 1 else x
    return P.copy(np.moveaxis(x, 1, -1)).reshape(-1, x.shape[1])


def _target(target, classes, ignore_index, op):
    """The target as int64 rows [R], range-checked (rule `index`; ignore_index exempt). When
    ignore_index is a class, its rows are moved out of the classes, to -1, by the kernels
    select.i64(eq.i64(t, ignore), -1, t), so the gather reads their fill and onehot puts
    nothing there. -> (t, the index that marks an ignored row)."""
    t = _indices(target, classes, op, ignore_index).reshape(-1)
    if not 0 <= ignore_index < classes:
        return t, ignore_index
    if P.xp_of(t) is not np:
        return P.xp_of(t).where(t == ignore_index, -1, t), -1
    K = I.KERNELS
    return K["select.i64"](K["eq.i64"](t, I.const(ignore_index, "i64")), I.const(-1, "i64"), t), -1


def _weights(weight, t, classes, op):
    """Each row's class weight w[t_r] (+0 for an ignored row) by the gather kernel, or None."""
    if weight is None:
        return None
    w = np_(weight, op)
    if w.shape != (classes,):
        raise UnsupportedOpError(f"aten.{op}: weight of shape {list(w.shape)}; give one weight per class ({classes})")
    return P.gather(w.reshape(1, classes, 1), t.reshape(1, -1), P.const(0.0, ())).reshape(-1)


def _reduction(reduction, op):
    if reduction not in (_NONE, _MEAN, _SUM):
        raise UnsupportedOpError(f"aten.{op} with reduction={reduction}: 0 (none), 1 (mean), 2 (sum) are defined")


def nll_forward(a, target, weight, reduction, ignore_index, op):
    """loss_r = -(x[r, t_r] w[t_r]) (unweighted: -x[r, t_r]); an ignored row's loss is +0
    (reduction none; the gather's fill -0, negated) or -0 (summed). sum: fold(add, -0) over the
    rows in order; mean: div(sum, total_weight), total_weight = fold(add, -0) of w[t_r] over the
    rows (unweighted: the count of kept rows, a host constant). -> (loss, total_weight)."""
    _reduction(reduction, op)
    want = tuple(a.shape[:1]) + tuple(a.shape[2:]) if a.dim() > 1 else ()
    if tuple(target.shape) != want:
        raise UnsupportedOpError(f"aten.{op}: target of shape {list(target.shape)} for input {list(a.shape)}; "
                                 f"torch expects {list(want)} (and raises too)")
    x = _rows(a, op)
    classes = x.shape[1]
    t, ignored = _target(target, classes, ignore_index, "nll_loss")
    picked = P.gather(x.reshape(x.shape[0], classes, 1), t.reshape(-1, 1),
                      P.const(-0.0 if reduction == _NONE else 0.0, ())).reshape(-1)
    wr = _weights(weight, t, classes, op)
    loss = P.neg(picked if wr is None else P.mul(picked, wr))
    if wr is None:
        kept = (t != ignored).sum()
        # a host constant on the CPU (what a decomposition names); on a device the count stays
        # there (exact below 2^24 rows either way): no device->host read, no upload
        total = np.asarray(F32(int(kept))) if P.xp_of(t) is np else kept.astype(F32)
    else:
        total = sum_dims(wr, None)
    if reduction == _NONE:
        return tt(loss.reshape(tuple(target.shape))), tt(total)
    s = sum_dims(loss, None)
    return tt(P.div(s, total) if reduction == _MEAN else s), tt(total)


def nll_backward(grad, a, target, weight, reduction, ignore_index, total_weight, op):
    """dx[r, t_r] = -(g_r w[t_r]) (none), w[t_r] (-(g / total_weight)) (mean) or w[t_r] (-g)
    (sum), unweighted without the factor w; +0 elsewhere and on ignored rows (onehot). An
    N-D input's gradient is moved back to [N, C, d...] by a copy kernel."""
    _reduction(reduction, op)
    x = np_(a, op)
    classes = x.shape[1] if x.ndim > 1 else x.shape[0]
    t, _ = _target(target, classes, ignore_index, "nll_loss")
    rows = t.shape[0]
    g = np_(grad, op)
    wr = _weights(weight, t, classes, op)
    if reduction == _NONE:
        g = g.reshape(rows)
        v = P.neg(g if wr is None else P.mul(wr, g))
    else:
        v = P.neg(P.div(g, np_(total_weight, op)) if reduction == _MEAN else g)
        v = P.xp_of(v).broadcast_to(v, (rows,)) if wr is None else P.mul(wr, v)
    dx = P.onehot(t, v, P.const(0.0, (classes,)))
    if x.ndim <= 2:
        return tt(dx.reshape(x.shape))
    return tt(P.copy(np.moveaxis(dx.reshape((x.shape[0],) + x.shape[2:] + (classes,)), -1, 1)))


@register(aten.nll_loss_forward.default)
@checked(aten.nll_loss_forward.default)
def nll_loss_forward(x, target, weight, reduction, ignore_index):
    return nll_forward(x, target, weight, reduction, ignore_index, "nll_loss_forward")


@register(aten.nll_loss_backward.default)
def nll_loss_backward(grad, x, target, weight, reduction, ignore_index, total_weight):
    return nll_backward(grad, x, target, weight, reduction, ignore_index, total_weight, "nll_loss_backward")


@register(aten.nll_loss2d_forward.default)
@checked(aten.nll_loss2d_forward.default)
def nll_loss2d_forward(x, target, weight, reduction, ignore_index):
    return nll_forward(x, target, weight, reduction, ignore_index, "nll_loss2d_forward")


@register(aten.nll_loss2d_backward.default)
def nll_loss2d_backward(grad, x, target, weight, reduction, ignore_index, total_weight):
    return nll_backward(grad, x, target, weight, reduction, ignore_index, total_weight, "nll_loss2d_backward")


# in-place shape changes (metadata only, exact; F.linear_cross_entropy squeezes its target in place)
EXACT.update({aten.squeeze_.dim, aten.squeeze_.default, aten.squeeze_.dims, aten.unsqueeze_.default})


# -- shrink gradients, margin losses (repops/reference/margin.py) ------------------------------------------
for _name in ("hardshrink_backward", "softshrink_backward"):
    register(getattr(aten, _name).default)(
        lambda g, a, lambd, _op=_name: tt(M.shrink_backward(np_(g, _op), np_(a, _op), lambd)))


def _margin_rows(a, target, op, target_rows):
    """x as [R, C] (a 0-dim input is one class, a 1-D one a single row) and the int64 target:
    [R] class indices (target_rows False) or [R, C] label lists."""
    x = np_(a, op)
    x = x.reshape(1, -1) if x.ndim < 2 else x
    t = _indices(target, x.shape[1], op, ignore=-1 if target_rows else None)
    return x, t.reshape(x.shape) if target_rows else t.reshape(-1)


def _reduce_rows(loss, reduction, shape, op):
    """none: the rows at torch's shape; mean: div(sum, R) (torch: total / nframe); sum: fold(add, -0)."""
    _reduction(reduction, op)
    if reduction == _NONE:
        return tt(loss.reshape(shape))
    s = sum_dims(loss, None)
    return tt(P.div(s, P.const(loss.shape[0], ())) if reduction == _MEAN else s)


def _grad_rows(grad, rows, reduction, op):
    g = np_(grad, op)
    return g.reshape(rows, 1) if reduction == _NONE else g


def _scale(x, reduction):
    """torch's g of a margin loss's gradient: 1/(R C) for a mean, else 1/C (an empty x: no element uses it)."""
    n = x.shape[0] * x.shape[1] if reduction == _MEAN else x.shape[1]
    return 1.0 / n if n else 0.0


def _p(p, op):
    if p not in (1, 2):
        raise UnsupportedOpError(f"aten.{op} with p={p}: torch defines p = 1 and 2")
    return p


@register(aten.multi_margin_loss.default)
@checked(aten.multi_margin_loss.default)
def multi_margin_loss(a, target, p=1, margin=1, weight=None, reduction=_MEAN):
    op = "multi_margin_loss"
    x, t = _margin_rows(a, target, op, False)
    w = None if weight is None else np_(weight, op)
    loss = M.multi_margin(x, t, _p(p, op), margin, w)
    return _reduce_rows(loss, reduction, (x.shape[0],) if target.dim() else (), op)


@register(aten.multi_margin_loss_backward.default)
def multi_margin_loss_backward(grad, a, target, p, margin, weight=None, reduction=_MEAN):
    op = "multi_margin_loss_backward"
    x, t = _margin_rows(a, target, op, False)
    w = None if weight is None else np_(weight, op)
    scale = _scale(x, reduction)
    dx = M.multi_margin_backward(_grad_rows(grad, x.shape[0], reduction, op), x, t, _p(p, op), margin, w, scale)
    return tt(dx.reshape(tuple(a.shape)))


@register(aten.multilabel_margin_loss_forward.default)
@checked(aten.multilabel_margin_loss_forward.default)
def multilabel_margin_loss_forward(a, target, reduction):
    op = "multilabel_margin_loss_forward"
    x, t = _margin_rows(a, target, op, True)
    tgt = M.is_target(t, x.shape[1])
    loss = M.multilabel_margin(x, t, tgt)
    return _reduce_rows(loss, reduction, (x.shape[0],) if target.dim() > 1 else (), op), \
        tt(tgt.reshape(tuple(target.shape)))


@register(aten.multilabel_margin_loss_backward.default)
def multilabel_margin_loss_backward(grad, a, target, reduction, is_target):
    op = "multilabel_margin_loss_backward"
    x, t = _margin_rows(a, target, op, True)
    scale = _scale(x, reduction)
    dx = M.multilabel_margin_backward(_grad_rows(grad, x.shape[0], reduction, op), x, t,
                                      np_(is_target, op).reshape(x.shape), scale)
    return tt(dx.reshape(tuple(a.shape)))


# -- bilinear (aten._trilinear) -------------------------------------------------------------------------------------
@register(aten._trilinear.default)
@checked(aten._trilinear.default)
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """Each input with size-1 axes inserted at its expand dims (in increasing order, torch's);
    out = fold(add, -0) over the sumdim axes in row-major order of (i1 i2) i3, broadcast;
    no sumdim: the product. (F.bilinear: out[n, o] = sum over (i, j) of (x1[n, i] W[o, i, j])
    x2[n, j].) The summed axes are dropped, as torch does."""
    op = "_trilinear"
    arrays = []
    for t, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        a = np_(t, op)
        for d in sorted(expand):
            a = np.expand_dims(a, d)
        arrays.append(a)
    prod = P.mul(P.mul(arrays[0], arrays[1]), arrays[2])
    return tt(sum_dims(prod, sorted(sumdim)) if len(sumdim) else prod)


# -- EmbeddingBag (repops/reference/embedding_bag.py) ---------------------------------------------------------------
def _bags(indices, offsets, include_last_offset, padding_idx, num_weights, op):
    """(int64 indices [L], offset2bag [L] (torch's), kept bag [L] (-1: padding or no bag), B)."""
    if indices.dim() != 1 or offsets.dim() != 1:
        raise UnsupportedOpError(f"aten.{op}: 1-D indices and offsets (F.embedding_bag flattens a 2-D input)")
    i = _indices(indices, num_weights, op).reshape(-1)
    o = _offsets(offsets, i.shape[0], include_last_offset, op)
    offset2bag, bags = EB.bag_of(o, i.shape[0], include_last_offset)
    return i, offset2bag, EB.kept(offset2bag, i, padding_idx, bags), bags


def _offsets(offsets, positions, include_last_offset, op):
    """torch's rules on the offsets, as the `index` fault (faults.index_in_range, so a job meets
    them at the same element on every device): each in [0, L]; the first 0; none below the one
    before (offsets[b + 1] - offsets[b] in [0, L]); with include_last_offset the last one L
    (torch accepts less there, but then its mean divides by a count its sum did not add)."""
    o = _indices(offsets, positions + 1, op).reshape(-1)
    if not o.shape[0]:
        return o
    K = EB.K
    faults.index_in_range(o[:1], 1, f"{op} (the first offset must be 0)")
    if o.shape[0] > 1:
        faults.index_in_range(K["sub.i64"](o[1:], o[:-1]), positions + 1,
                              f"{op} (offsets must not decrease: offsets[b + 1] - offsets[b])")
    if include_last_offset:
        faults.index_in_range(K["sub.i64"](o[-1:], I.const(positions, "i64")), 1,
                              f"{op} (include_last_offset: offsets[-1] - {positions}, the indices' count: "
                              "must be 0; torch's sum and mean disagree otherwise)")
    return o


def _bag_mode(mode, psw, scale_grad_by_freq, op):
    if mode not in (EB.SUM, EB.MEAN, EB.MAX):
        raise UnsupportedOpError(f"aten.{op} with mode={mode}: 0 (sum), 1 (mean), 2 (max) are defined")
    if psw is not None and mode != EB.SUM:
        raise UnsupportedOpError(f"aten.{op}: per_sample_weights with mode {mode}: torch defines them for sum only")
    if scale_grad_by_freq:
        raise UnsupportedOpError(f"aten.{op} with scale_grad_by_freq=True: not defined by RepOps (as for embedding)")


@register(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
@checked(aten._embedding_bag.default)
def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=-1):
    """-> (out, offset2bag, bag_size, max_indices): bag_size counts each bag's kept positions;
    max_indices is [B, D] in max mode (torch's), else bag_size's copy."""
    op = "_embedding_bag"
    _bag_mode(mode, per_sample_weights, False, op)
    w = np_(weight, op)
    i, offset2bag, bag, bags = _bags(indices, offsets, include_last_offset, padding_idx, w.shape[0], op)
    psw = None if per_sample_weights is None else np_(per_sample_weights, op).reshape(-1)
    out, arg = EB.embedding_bag(w, i, bag, bags, mode, psw)
    size = EB.bag_size(bag, bags)
    ints = lambda a: torch.from_numpy(a) if P.xp_of(a) is np else torch.from_dlpack(a)  # noqa: E731
    return tt(out), ints(offset2bag), ints(size), ints(EB.K["copy.i64"](size) if arg is None else arg)


@register(aten._embedding_bag_dense_backward.default)
def embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                 scale_grad_by_freq, mode, per_sample_weights, padding_idx=-1):
    op = "_embedding_bag_dense_backward"
    _bag_mode(mode, per_sample_weights, scale_grad_by_freq, op)
    g = np_(grad, op)
    i = _indices(indices, num_weights, op).reshape(-1)
    bag = EB.kept(_indices(offset2bag, g.shape[0] + 1, op).reshape(-1), i, padding_idx, g.shape[0])
    psw = None if per_sample_weights is None else np_(per_sample_weights, op).reshape(-1)
    at = arr(maximum_indices) if mode == EB.MAX else None
    return tt(EB.embedding_bag_backward(g, i, bag, g.shape[0], num_weights, mode, psw, at))


@register(aten._embedding_bag_per_sample_weights_backward.default)
def embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
    op = "_embedding_bag_per_sample_weights_backward"
    _bag_mode(mode, None, False, op)
    g, w = np_(grad, op), np_(weight, op)
    i = _indices(indices, w.shape[0], op).reshape(-1)
    bag = EB.kept(_indices(offset2bag, g.shape[0] + 1, op).reshape(-1), i, padding_idx, g.shape[0])
    return tt(EB.per_sample_weights_backward(g, w, i, bag))


@register(aten._embedding_bag_backward.default)
def embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
                           scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx=-1):
    if sparse:
        raise UnsupportedOpError("aten._embedding_bag_backward with sparse=True: RepOps computes dense gradients "
                                 "only; build the EmbeddingBag with sparse=False")
    return embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                        scale_grad_by_freq, mode, per_sample_weights, padding_idx)


# -- distances (repops/reference/distance.py) ------------------------------------------------------------------------
@register(aten._cdist_forward.default)
@checked(aten._cdist_forward.default)
def cdist_forward(x1, x2, p, compute_mode=None):
    """Always the direct formula (compute_mode's matmul shortcut is torch's speed choice)."""
    op = "_cdist_forward"
    return tt(D.cdist(np_(x1, op), np_(x2, op), float(p)))


@register(aten._cdist_backward.default)
def cdist_backward(grad, x1, x2, p, cdist):
    op = "_cdist_backward"
    return tt(D.cdist_backward(np_(grad, op), np_(x1, op), np_(x2, op), float(p), np_(cdist, op)))


def _pair_rows(n):
    """pdist's pairs i < j in row-major order: for each row i, (its first pair's place in the
    result, its pairs' place in a flat [n n] matrix: i n + i + 1, and their count n - 1 - i)."""
    start = 0
    for i in range(n - 1):
        yield start, i * n + i + 1, n - 1 - i
        start += n - 1 - i


@register(aten._pdist_forward.default)
@checked(aten._pdist_forward.default)
def pdist_forward(a, p=2):
    """cdist(x, x) above the diagonal, row after row: one place() copy of its row pieces."""
    op = "_pdist_forward"
    x = np_(a, op)
    n = x.shape[0]
    d = D.cdist(x, x, float(p)).reshape(n * n)
    pieces = [(start, 1, d[at:at + k]) for start, at, k in _pair_rows(n)]
    return tt(P.place((n * (n - 1) // 2,), 0, pieces) if pieces else P.copy(d[:0]))


@register(aten._pdist_backward.default)
def pdist_backward(grad, a, p, pdist):
    """G = the pair gradients placed at (i, j > i) of a +0 [n, n] (one place() copy), then cdist's
    gradient with x as x1 (G) plus with x as x2 (Gᵀ, cdist(x, x)ᵀ = cdist(x, x))."""
    op = "_pdist_backward"
    x, g = np_(a, op), np_(grad, op)
    n = x.shape[0]
    G = P.place((n * n,), 0, [(at, 1, g[start:start + k]) for start, at, k in _pair_rows(n)]).reshape(n, n)
    d = D.cdist(x, x, float(p))
    left = D.cdist_backward(G, x, x, float(p), d)
    right = D.cdist_backward(P.copy(G.T), x, x, float(p), d)
    return tt(P.add(left, right))


# -- F.linear_cross_entropy's chunked path (repops/reference/linear_ce.py) --------------------------------------------
def _register_linear_cross_entropy():
    try:
        import torch.nn.modules.linear_cross_entropy  # noqa: F401  (defines torch_nn::* on import)
        chunked = torch.ops.torch_nn._linear_cross_entropy_batch_chunked.default
        unreduced = torch.ops.torch_nn._linear_cross_entropy_batch_chunked_no_reduction.default
    except (ImportError, AttributeError):  # a torch without it: nothing to define
        return

    @register(unreduced)
    def linear_cross_entropy_chunked_none(*args):
        raise UnsupportedOpError(
            "F.linear_cross_entropy(reduction='none') on the chunked path (torch_nn::_linear_cross_entropy_batch_"
            "chunked_no_reduction): its backward is torch's Python loop over out= buffers, not defined by RepOps; "
            "use reduction 'mean' or 'sum', or F.cross_entropy(F.linear(x, w, b), t, reduction='none')")

    @register(chunked)
    def linear_cross_entropy_chunked(a, linear_weight, target, linear_bias, weight, reduction, ignore_index,
                                     label_smoothing, batch_chunk_size, acc_policy, acc_dtype, allow_retain_graph,
                                     want_x, want_w, want_b):
        """-> (loss, dx, dW, db) for an upstream gradient of 1 (an unwanted one: torch's empty shape)."""
        op = "torch_nn._linear_cross_entropy_batch_chunked"
        if reduction not in ("mean", "sum") or a.dim() != 2 or linear_weight.dim() != 2 or label_smoothing:
            raise UnsupportedOpError(f"{op}: RepOps defines 2-D input and weight, reduction mean or sum, no label "
                                     f"smoothing (F.linear_cross_entropy's chunked path); got {list(a.shape)}, "
                                     f"{list(linear_weight.shape)}, {reduction!r}, label_smoothing={label_smoothing}")
        x, W = np_(a, op), np_(linear_weight, op)
        t, _ = _target(target, W.shape[0], ignore_index, "linear_cross_entropy")
        b = None if linear_bias is None else np_(linear_bias, op)
        w = None if weight is None else np_(weight, op)
        loss, dlogits = LCE.linear_cross_entropy(x, W, b, t, w, reduction == "mean")
        dx, dw, db = LCE.grads(dlogits, x, W, want_x, want_w, want_b and b is not None)
        empty = lambda n: P.const(0.0, (0,) * n)  # noqa: E731
        return (tt(loss), tt(dx if dx is not None else empty(2)), tt(dw if dw is not None else empty(2)),
                tt(db if db is not None else empty(1)))


_register_linear_cross_entropy()
