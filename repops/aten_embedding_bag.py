"""EmbeddingBag on RepOps (aten._embedding_bag, its dense and per-sample-weight gradients):
the compositions of repops/reference/embedding_bag.py (docs/NUMERICS.md §8, "Transposed
convolution and losses with classes"), with torch's rules on the offsets as the index fault."""
from __future__ import annotations

import torch

from . import faults
from .aten import _indices, arr, np_, register, tensor, tt
from .errors import UnsupportedOpError
from .reference import embedding_bag as EB
from .reference import integers as I
from .torch_checks import checked

aten = torch.ops.aten


_SPREADS = ("and summing it through the one-hot product would spread NaN into bags or rows it does not belong to "
            "(torch keeps it in its own): the weights or gradients have overflowed")


def _finite(op, *arrays):
    """The sums below are one-hot products (docs/NUMERICS.md): a non-finite term is a fault
    claim (faults.finite), not NaN in other bags. The whole array is checked (a stricter rule
    than the terms used: an unread non-finite row faults too)."""
    for a in arrays:
        if a is not None:
            faults.finite(a, op, _SPREADS)


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
    if mode != EB.MAX:
        _finite(op, w, psw)
    out, arg = EB.embedding_bag(w, i, bag, bags, mode, psw, lambda a: _finite(op, a))
    size = EB.bag_size(bag, bags)
    return tt(out), tensor(offset2bag), tensor(size), tensor(EB.K["copy.i64"](size) if arg is None else arg)


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
    _finite(op, g, psw)
    return tt(EB.embedding_bag_backward(g, i, bag, g.shape[0], num_weights, mode, psw, at,
                                        lambda a: _finite(op, a)))


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
