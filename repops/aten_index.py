"""Advanced indexing of float tensors: x[i0, i1, ...] (aten.index.Tensor) and its writes,
index_put (accumulate: summed; else the last write wins), index_copy/index_fill/take/put, by
any number of integer index tensors, adjacent or not, with torch's negative indices. Each is
integer kernels on the indices (wrap, range fault, the flat index) and ONE gather (read), sum
(accumulate) or last-source select (write) over the indexed dims merged into one:
docs/NUMERICS.md §8, "Models we did not write" and "Ordering"."""
from __future__ import annotations

import numpy as np
import torch

from .aten import (REGISTRY, _indices, _inplace, _masked_fill, _result, _scalar_as_vector, arr, np_, register, summed_rows,
                   tt)
from .errors import UnsupportedOpError
from .reference import ordering as O
from .reference import prims as P

aten = torch.ops.aten


def _used(op: str, indices) -> list[int]:
    """The dims indexed by integer tensors (a bool or uint8 mask makes a shape that depends on
    values: refused, with what to write instead)."""
    used = [d for d, t in enumerate(indices) if t is not None]
    if not used or any(indices[d].dtype in (torch.bool, torch.uint8) for d in used):
        raise UnsupportedOpError(f"aten.{op} of a float tensor by {[None if t is None else t.dtype for t in indices]}: "
                                 "RepOps defines indexing by integer tensors; a boolean mask makes a shape that "
                                 "depends on the values: use torch.where(mask, ...) or multiply by the mask")
    return used


def flat_index(x, indices, op, copy=P.copy):
    """(x with the indexed dims merged into one at position p, p, the flat index over them
    (shape: the index tensors broadcast), the shape of the indexed dims). Each index is
    wrapped (torch's negative indices) and range-checked in turn (rule `index`), then
    flat = add(mul(flat, n_k), i_k) (integer kernels, numpy broadcasting). Non-adjacent index
    dims are moved first (a view), as torch puts their result dims first."""
    used = _used(op, indices)
    tensors = [indices[d] for d in used]
    if used != list(range(used[0], used[-1] + 1)):
        x = np.transpose(x, used + [d for d in range(x.ndim) if d not in used])
        used = list(range(len(used)))
    p, k = used[0], len(used)
    sizes = x.shape[p:p + k]
    flat = None
    for t, n in zip(tensors, sizes):
        i = _indices(t, n, op, wrap=True)
        flat = i if flat is None else O.K["add.i64"](O.K["mul.i64"](flat, O.const(n)), i)
    merged = x.shape[:p] + (int(np.prod(sizes)),) + x.shape[p + k:]
    if not x.flags.c_contiguous:  # a permuted or strided input: one copy kernel (of x's dtype), then a view
        x = copy(x)
    return x.reshape(merged), p, flat, sizes


@register(aten.index.Tensor)
def index(a, indices):
    """x[i0, i1, ...]: the gather kernel along the merged indexed dims at the flat index."""
    return tt(gather_flat(*flat_index(np_(a, "index"), indices, "index")[:3], P.gather, P.const(0.0, ())))


def gather_flat(x, p, flat, gather, fill):
    """x's slices at the flat index along its dim p, by one gather kernel (of x's dtype)."""
    lead = int(np.prod(x.shape[:p]))
    idx = flat.reshape(-1)
    rest = int(np.prod(x.shape[p + 1:]))  # (explicit: an empty x has no -1 to infer)
    out = gather(x.reshape(lead, x.shape[p], rest), np.broadcast_to(idx.reshape(1, -1), (lead, idx.size)), fill)
    return out.reshape(x.shape[:p] + flat.shape + x.shape[p + 1:])


def _index_put(a, indices, values, accumulate):
    """x[i0, i1, ...] += values (accumulate: the backward of indexing): values (broadcast to
    the indexed shape) summed into the merged dim's slices by embedding backward's rule (onto
    each target in increasing source position, from +0), then added to x. Without accumulate,
    x[i0, i1, ...] = values: the last write to a target wins."""
    mask = _fill_mask(a, indices, values)
    if mask is not None and not accumulate:
        return _masked_fill(a, mask, values.reshape(()))
    if not accumulate:
        return _index_put_last_wins(a, indices, values)
    x0 = np_(a, "index_put")
    x, p, flat, sizes = flat_index(x0, indices, "index_put")
    shape = x.shape[:p] + flat.shape + x.shape[p + 1:]
    v = np.broadcast_to(np_(values, "index_put"), shape)
    b = flat.ndim
    vm = P.copy(np.moveaxis(v, list(range(p, p + b)), list(range(b))))  # the source rows in flat order
    n = x.shape[p]
    inner = int(np.prod(x.shape[:p] + x.shape[p + 1:]))  # (no -1: ambiguous when empty)
    add = summed_rows(flat.reshape(-1), vm.reshape(flat.size, inner), n, "index_put")
    add = np.moveaxis(add.reshape((n,) + x.shape[:p] + x.shape[p + 1:]), 0, p)
    return _unmerged(P.add(x, add), x0, indices, p, sizes)


def _unmerged(out, x0, indices, p, sizes):
    """A result over the merged indexed dims back in x's shape (non-adjacent index dims moved
    back: a view)."""
    out = out.reshape(out.shape[:p] + tuple(sizes) + out.shape[p + 1:])
    used = [d for d, t in enumerate(indices) if t is not None]
    if used != list(range(used[0], used[-1] + 1)):
        order = used + [d for d in range(x0.ndim) if d not in used]
        out = np.transpose(out, [order.index(d) for d in range(x0.ndim)])  # (axes as ints: a device array's)
    return out


def _fill_mask(a, indices, values):
    """`x[mask] = v` with one boolean mask over dims p.. of x and one value (Hugging Face's
    `extended_attention_mask[attention_mask == 2] = max`): no shape depends on the mask, it is
    masked_fill by the mask broadcast over x (the same select kernel). -> that mask, or None."""
    used = [d for d, t in enumerate(indices) if t is not None]
    if len(used) != 1 or indices[used[0]].dtype != torch.bool or values.numel() != 1:
        return None
    p, m = used[0], indices[used[0]]
    if tuple(m.shape) != tuple(a.shape[p:p + m.dim()]):
        return None  # (torch's own shape error is raised by the integer path's refusal instead)
    return m.reshape((1,) * p + tuple(m.shape) + (1,) * (a.dim() - p - m.dim()))


def _index_put_last_wins(a, indices, values):
    """x[i0, i1, ...] = values: each target of the merged indexed dims takes the value of the
    last index position naming it (torch's CPU loop; on CUDA torch leaves it unspecified)."""
    x0 = np_(a, "index_put")
    x, p, flat, sizes = flat_index(x0, indices, "index_put")
    n, B = x.shape[p], flat.size
    src_pos = O.last_source(flat.reshape(1, B), n).reshape(n)
    written = O.K["le.i64"](O.const(0), src_pos)
    v = np.broadcast_to(np_(values, "index_put"), x.shape[:p] + flat.shape + x.shape[p + 1:])
    lead, rest = int(np.prod(x.shape[:p])), int(np.prod(x.shape[p + 1:]))
    if B == 0:  # nothing written: x itself (a copy kernel, so the result is a kernel output)
        return _unmerged(P.copy(x), x0, indices, p, sizes)
    vm = P.copy(v).reshape(lead, B, rest)
    got = P.gather(vm, np.broadcast_to(src_pos.reshape(1, n), (lead, n)), P.const(0.0, ()))
    out = P.select(written.reshape(1, n, 1), got, x.reshape(lead, n, rest)).reshape(x.shape)
    return _unmerged(out, x0, indices, p, sizes)


register(aten.index_put.default)(lambda a, indices, values, accumulate=False: _result(
    _index_put(a, indices, values, accumulate)))
register(aten.index_put_.default, aten._index_put_impl_.default)(
    lambda a, indices, values, accumulate=False, unsafe=False: _inplace(a, _index_put(a, indices, values, accumulate)))


# -- in-place variants of the scatter ops: the op, then one copy kernel whose output is self ----------
def _in_place(op):
    out_of_place = REGISTRY[op]
    return lambda a, *args, **kwargs: _inplace(a, arr(out_of_place(a, *args, **kwargs)))


register(aten.index_add_.default)(_in_place(aten.index_add.default))


# -- index_copy, index_fill, take: the writes and reads above along one dim -----------------------------------
def _along(dim, ndim, index):
    return [None] * (dim % ndim) + [index]


@_scalar_as_vector()
def _index_copy(a, dim, index, source, op):
    """x.index_copy(dim, idx, src): x[..., idx, ...] = src, the last write winning; torch refuses
    a negative index here (the `index` fault), where index_fill and take wrap it."""
    _indices(index, a.shape[dim % a.dim()], op)
    return _index_put_last_wins(a, _along(dim, a.dim(), index.reshape(-1)), source)


@_scalar_as_vector()
def _index_fill(a, dim, index, value, op):
    return _index_put_last_wins(a, _along(dim, a.dim(), index.reshape(-1)), value)


register(aten.index_copy.default)(lambda a, dim, index, source: _result(_index_copy(a, dim, index, source, "index_copy")))
register(aten.index_copy_.default)(lambda a, dim, index, source: _inplace(a, _index_copy(a, dim, index, source,
                                                                                      "index_copy_")))
register(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)(
    lambda a, dim, index, value: _result(_index_fill(a, dim, index, value, "index_fill")))
register(aten.index_fill_.int_Scalar, aten.index_fill_.int_Tensor)(
    lambda a, dim, index, value: _inplace(a, _index_fill(a, dim, index, value, "index_fill_")))


@register(aten.take.default)
def take(a, index):
    """x.take(idx): x flattened (row-major), then x[idx] (negative entries wrap, as torch)."""
    x = np_(a, "take")
    flat = (x if x.flags.c_contiguous else P.copy(x)).reshape(-1)
    return tt(gather_flat(*flat_index(flat, [index], "take")[:3], P.gather, P.const(0.0, ())))


def _flattened(t: torch.Tensor) -> torch.Tensor:
    """t flattened as a view of t or of one copy kernel's output (a reshape that copies would
    leave an operand no descriptor names)."""
    if t.is_contiguous() or t.device.type != "cpu":
        return t.reshape(-1)
    a = arr(t)
    return torch.from_numpy(P.copy(a) if t.is_floating_point() else O.K["copy.i64"](a.astype(np.int64))).reshape(-1)


@register(aten.put.default)
def put(a, index, source, accumulate=False):
    """x.put(idx, src) (take's backward, accumulate=True): index_put on x flattened."""
    out = _index_put(_flattened(a), [_flattened(index)], _flattened(source), accumulate)
    return _result(out.reshape(tuple(a.shape)))
