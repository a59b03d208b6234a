"""The losses with classes on RepOps (docs/NUMERICS.md §8, "Transposed convolution and losses
with classes"): nll_loss (and so cross_entropy) for 1-D, 2-D and N-D inputs ([N, C, d1, ...],
torch's nll_loss2d), class weights, an ignore_index that is a class; the margin losses and the
shrink gradients (repops/reference/margin.py); F.linear_cross_entropy's chunked op; CTC loss
and its backward (repops/reference/ctc.py). Rows are the (n, d...) positions in row-major order,
torch's order; each row's log-probability and class weight are picked by the gather kernel.

Unweighted 2-D input with an ignore_index outside the classes keeps the kernel sequence it
always had (a job's decomposition names its kernels by position)."""
from __future__ import annotations

import numpy as np
import torch

from . import faults, integer
from .aten import _indices, arr, np_, register, tt
from .errors import UnsupportedOpError
from .reference import ctc as CTC
from .reference import integers as I
from .reference import linear_ce as LCE
from .reference import margin as M
from .reference import ordering as O
from .reference import prims as P
from .reference.fold import sum_dims
from .reference.ordering import K
from .torch_checks import checked

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
    nothing there (ordering.K: on a device, the same arithmetic where t lives). -> (t, the index
    that marks an ignored row)."""
    t = _indices(target, classes, op, ignore_index).reshape(-1)
    if not 0 <= ignore_index < classes:
        return t, ignore_index
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
        # the rows t keeps (its ignored rows are ignore_index in the target), counted exactly and
        # rounded once: a host constant on the CPU (what a decomposition names); on a device the
        # count stays there, in torch's memory (no device->host read, no upload, no DLPack)
        kept = (target.reshape(-1) != ignore_index).sum()
        total = np.asarray(F32(int(kept))) if P.xp_of(t) is np else arr(kept.to(torch.float32))
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
    shape = tuple(a.shape)  # (its values are not read: no conversion of the input)
    classes = shape[1] if len(shape) > 1 else shape[0]
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
    if len(shape) <= 2:
        return tt(dx.reshape(shape))
    return tt(P.copy(np.moveaxis(dx.reshape((shape[0],) + shape[2:] + (classes,)), -1, 1)))


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


# (in-place shape changes, squeeze_ in F.linear_cross_entropy: repops/aten_reduce.py)


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


# -- CTC loss (repops/reference/ctc.py) -------------------------------------------------------------------------
def _ctc_ints(v, n: int, what: str, op: str):
    """Lengths as int64 [n]: a tensor's (a to_i64 kernel for int32), or a list's values as one
    place() copy of constants (so every operand is a kernel output or a constant)."""
    if isinstance(v, torch.Tensor):
        if v.dtype not in (torch.int64, torch.int32) or v.dim() > 1 or v.numel() != n:
            raise UnsupportedOpError(f"aten.{op}: {what} must be an int64 or int32 tensor of {n} elements "
                                     f"(got {v.dtype}{list(v.shape)}; torch refuses it too)")
        a = arr(v).reshape(n)  # (an unbatched call's 0-dim length: a view)
        return a if a.dtype == np.int64 else O.K["to_i64.i32"](a)
    v = [int(x) for x in v]
    if len(v) != n:
        raise UnsupportedOpError(f"aten.{op}: {what} must have {n} elements (one per batch element), got {len(v)}")
    if not n:
        return O.K["copy.i64"](I.const(0, "i64", (0,)))
    return P.place((n,), 0, [(b, 1, I.const(x, "i64", (1,))) for b, x in enumerate(v)], np.int64(0), O.K["copy.i64"])


def _ctc_layout(log_probs, targets, input_lengths, target_lengths, blank, op):
    """(lp [T, N, C] row-major, Layout). S, the extended target's half width: max(target_lengths)
    for int lists (torch's log_alpha width 2S + 1); for length tensors a bound from the shapes
    (targets.size(1), or the concatenated targets' count), read without the values."""
    if log_probs.dim() != 3:
        raise UnsupportedOpError(f"aten.{op}: log_probs must be [T, N, C], got {list(log_probs.shape)}")
    T, n, C = log_probs.shape
    if not 0 <= blank < C:
        raise UnsupportedOpError(f"aten.{op}: blank must be in label range (blank={blank}, {C} classes; torch refuses "
                                 "it too)")
    if targets.dtype not in (torch.int64, torch.int32) or targets.dim() not in (1, 2) or \
            (targets.dim() == 2 and targets.shape[0] != n):
        raise UnsupportedOpError(f"aten.{op}: targets must be int64/int32, [N, S] padded or 1-D concatenated "
                                 f"(got {targets.dtype}{list(targets.shape)})")
    if T == 0:
        raise UnsupportedOpError(f"aten.{op}: an input of no time steps")
    il = _ctc_ints(input_lengths, n, "input_lengths", op)
    tl = _ctc_ints(target_lengths, n, "target_lengths", op)
    lists = not isinstance(input_lengths, torch.Tensor) and not isinstance(target_lengths, torch.Tensor)
    given = targets.shape[1] if targets.dim() == 2 else targets.shape[0]
    if lists:
        ils, tls = [int(x) for x in input_lengths], [int(x) for x in target_lengths]
        if any(x < 0 or x > T for x in ils):
            raise UnsupportedOpError(f"aten.{op}: input_lengths must lie in [0, T = {T}] (got {ils}; torch refuses it)")
        if any(x < 0 for x in tls) or (targets.dim() == 2 and any(x > given for x in tls)) or \
                (targets.dim() == 1 and sum(tls) != given):
            raise UnsupportedOpError(f"aten.{op}: target_lengths {tls} do not fit targets {list(targets.shape)} "
                                     "(torch refuses it)")
        S = max(tls, default=0)
    else:  # values in the step's kernels: a fault claim where they do not fit (torch raises)
        zero = I.const(0, "i64")
        faults.holds(O.K["and.bool"](O.K["le.i64"](zero, il), O.K["le.i64"](il, I.const(T, "i64"))), op,
                     f"input_lengths must lie in [0, T = {T}] (torch refuses it)")
        fits = O.K["le.i64"](tl, I.const(given, "i64")) if targets.dim() == 2 else O.K["le.i64"](zero, tl)
        faults.holds(O.K["and.bool"](O.K["le.i64"](zero, tl), fits), op,
                     "target_lengths must be >= 0 and fit the targets (torch refuses it)")
        if targets.dim() == 1 and n:
            total = integer.cumsum_array(tl, 0)[-1:]
            faults.holds(O.K["eq.i64"](total, I.const(given, "i64")), op,
                         f"target_lengths must sum to the concatenated targets' count {given} (torch refuses it)")
        S = given
    t = arr(targets)
    t = t if t.dtype == np.int64 else O.K["to_i64.i32"](t)
    if targets.dim() == 2:
        tgt = t[:, :S]
    elif S and n:  # row b's targets start at the exclusive cumsum of the lengths: one gather.i64
        starts = O.K["sub.i64"](integer.cumsum_array(tl, 0), tl)
        index = O.K["add.i64"](starts[:, None], O.positions(S)[None, :]).reshape(1, n * S)
        data = t.reshape(1, -1, 1)
        tgt = (I.KERNELS["gather.i64"](data, index, I.const(0, "i64")) if P.xp_of(data) is np else
               P.picked(data, index, np.int64(0), np.int64)).reshape(n, S)
    else:
        tgt = O.K["copy.i64"](I.const(0, "i64", (n, S)))
    lay = CTC.Layout(tgt, il, tl, blank, T)
    faults.index_in_range(lay.tp, C, op)  # a target outside the classes (torch reads out of bounds)
    lp = np_(log_probs, op)
    return (lp if lp.flags.c_contiguous else P.copy(lp)), lay


@register(aten._ctc_loss.default, aten._ctc_loss.Tensor)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """-> (neg_log_likelihood [N], log_alpha [N, T, 2S + 1]); zero_infinity is torch's composite's
    (F.ctc_loss) and the backward's."""
    op = "_ctc_loss"
    lp, lay = _ctc_layout(log_probs, targets, input_lengths, target_lengths, blank, op)
    lpe = lay.picked(lp)
    log_alpha = CTC.alpha(lpe, lay)
    return tt(CTC.neg_log_likelihood(log_alpha, lay)), tt(log_alpha)


@register(aten._ctc_loss_backward.default, aten._ctc_loss_backward.Tensor)
def ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha, blank,
                      zero_infinity=False):
    op = "_ctc_loss_backward"
    lp, lay = _ctc_layout(log_probs, targets, input_lengths, target_lengths, blank, op)
    la = np_(log_alpha, op)
    if tuple(la.shape) != (lp.shape[1], lp.shape[0], lay.L):
        raise UnsupportedOpError(f"aten.{op}: log_alpha {list(la.shape)} is not _ctc_loss's "
                                 f"{[lp.shape[1], lp.shape[0], lay.L]}")
    la = la if la.flags.c_contiguous else P.copy(la)
    g = np_(grad, op)
    g = P.xp_of(g).broadcast_to(g, (lp.shape[1],))
    lpe = lay.picked(lp)
    return tt(CTC.gradient(lp, lpe, la, np_(neg_log_likelihood, op), g, lay, zero_infinity))
