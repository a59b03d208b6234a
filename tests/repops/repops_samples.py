"""One sample table drives the RepOps op tests: name -> (function of tensors, input maker).
Each function is ordinary PyTorch; under repops.deterministic() it runs RepOps kernels."""
import copy

import torch
import torch.nn.functional as F


def _x(*shape, lo=-3.0, hi=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


SAMPLES = {
    "add": (lambda a, b: a + b * 0.5, lambda: (_x(5, 7), _x(7, seed=1))),
    "sub": (lambda a, b: a - b, lambda: (_x(5, 7), _x(5, 7, seed=1))),
    "mul": (lambda a, b: a * b, lambda: (_x(3, 1, 4), _x(2, 4, seed=1))),
    "div": (lambda a, b: a / b, lambda: (_x(6, 5), _x(6, 5, lo=0.5, seed=1))),
    "neg_sqrt_rsqrt": (lambda a: torch.rsqrt(a) - torch.sqrt(a), lambda: (_x(9, lo=0.01),)),
    "pow": (lambda a: a.pow(2) + a.pow(3) - a.pow(-1), lambda: (_x(11, lo=0.2),)),
    "exp_log": (lambda a: torch.exp(a) + torch.log(a + 3.5), lambda: (_x(4, 8),)),
    "relu": (lambda a: torch.relu(a), lambda: (_x(4, 8),)),
    "gelu": (lambda a: F.gelu(a), lambda: (_x(4, 8),)),
    "silu": (lambda a: F.silu(a), lambda: (_x(4, 8),)),
    "softmax": (lambda a: torch.softmax(a, -1), lambda: (_x(3, 4, 9),)),
    "log_softmax": (lambda a: torch.log_softmax(a, 1), lambda: (_x(5, 9),)),
    "sum_mean": (lambda a: a.sum(0) + a.mean(-1, keepdim=True), lambda: (_x(6, 6),)),
    "layer_norm": (lambda a, w, b: F.layer_norm(a, (8,), w, b), lambda: (_x(5, 8), _x(8, seed=1), _x(8, seed=2))),
    "linear": (lambda a, w, b: F.linear(a, w, b), lambda: (_x(4, 6), _x(3, 6, seed=1), _x(3, seed=2))),
    "bmm": (lambda a, b: a @ b, lambda: (_x(2, 3, 5), _x(2, 5, 4, seed=1))),
    "cross_entropy": (lambda a, t: F.cross_entropy(a, t), lambda: (_x(6, 5), torch.tensor([0, 4, 2, 2, 1, 3]))),
    "embedding": (lambda w, i: F.embedding(i, w), lambda: (_x(10, 4), torch.tensor([[1, 3, 3], [0, 9, 1]]))),
    "masked_fill": (lambda a: a.masked_fill(a > 0, float("-inf")), lambda: (_x(4, 4),)),
}
SAMPLES.update({
    "tanh": (lambda a: torch.tanh(a), lambda: (_x(4, 8),)),
    "sigmoid": (lambda a: torch.sigmoid(a), lambda: (_x(4, 8),)),
    "sin_cos": (lambda a: torch.sin(a) * torch.cos(a), lambda: (_x(5, 7, lo=-60, hi=60),)),
})
SAMPLES.update({  # #38: reductions and elementwise ops torch's decompositions reach
    "amax_amin": (lambda a: a.amax(0) - a.amin((-1, 0), keepdim=True), lambda: (_x(4, 6),)),
    "var_std": (lambda a: torch.var(a, 1) + torch.std(a, 0, correction=0).sum(), lambda: (_x(5, 6),)),
    "sign_erf": (lambda a: torch.sign(a) * torch.erf(a), lambda: (_x(5, 7),)),
})
SAMPLES.update({  # #38: rounding, remainders, IEEE functions, base-2/10 logs (repops/reference/rounding.py)
    "rounding_remainders": (lambda a, b: torch.floor(a) + torch.ceil(a) - torch.round(a, decimals=1) + torch.trunc(a)
                            + torch.fmod(a, b) + torch.remainder(a, b) - torch.div(a, b, rounding_mode="floor"),
                            lambda: (_x(4, 6, lo=-30, hi=30), _x(4, 6, seed=1))),
    "ieee_functions": (lambda a, b: torch.nextafter(a.detach(), b.detach()) + torch.fmax(a, b) - torch.fmin(a, b)
                       + torch.hypot(a, b) + torch.frexp(a)[0] + torch.angle(a), lambda: (_x(5, 6), _x(5, 6, seed=1))),
    "logs_base2_10": (lambda a: torch.exp2(a) + torch.log2(a.abs() + 0.5) + torch.log10(a.abs() + 0.5)
                      + torch.log1p(a.abs()) + torch.expm1(a) + torch.logaddexp2(a, a * 0.5), lambda: (_x(5, 6),)),
})


# -- input variants every sample also runs on (bitwise tests) -------------------------------------------
def _masked(x, seed, frac):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(x.shape, generator=g) < frac, g


def specials(x, seed):
    """15 % of the elements replaced by +-0, +-inf, NaN, subnormals, a huge value."""
    if not x.is_floating_point():
        return x
    mask, g = _masked(x, seed, 0.15)
    pool = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -3e-39, 1e30])
    x = x.clone()
    x[mask] = pool[torch.randint(0, len(pool), (int(mask.sum()),), generator=g)]
    return x


def subnormal_heavy(x, seed):
    """Half of the elements scaled by 2^-135: subnormal operands, and products and sums that
    underflow (where a flush-to-zero kernel differs)."""
    if not x.is_floating_point():
        return x
    mask, _ = _masked(x, seed, 0.5)
    return torch.where(mask, x * 2.0 ** -135, x)


def signed_zeros(x, seed):
    """A third of the elements +0 or -0 (where a lost zero sign shows)."""
    if not x.is_floating_point():
        return x
    mask, g = _masked(x, seed, 0.33)
    sign = torch.where(torch.rand(x.shape, generator=g) < 0.5, -1.0, 1.0)
    return torch.where(mask, sign * 0.0, x)


VARIANTS = {"specials": specials, "subnormal": subnormal_heavy, "signed_zero": signed_zeros}


# -- what models we did not write use (issue 17): convolution, normalization, pooling, attention,
# recurrent layers, gather/scatter/index ops, padding, masking -----------------------------------
def _i(*shape, hi, seed=0):
    return torch.randint(0, hi, shape, generator=torch.Generator().manual_seed(seed))


def _module(cls, *args, seed=0, **kwargs):
    torch.manual_seed(seed)
    return cls(*args, **kwargs)


_LSTM = _module(torch.nn.LSTM, 4, 5, num_layers=2, bidirectional=True, proj_size=3, batch_first=True)
_GRU = _module(torch.nn.GRU, 4, 5)
_RNN = _module(torch.nn.RNN, 4, 3, nonlinearity="relu")
_MHA = _module(torch.nn.MultiheadAttention, 8, 2, batch_first=True)
_MEAN, _VAR = torch.tensor([-1.0, 0.0, 1.0]), torch.tensor([0.5, 1.25, 2.0])
_CAUSAL = torch.ones(5, 5, dtype=torch.bool).triu(1)
_ON: dict = {}  # (id of a module or tensor above, device) -> its copy there


def on_device(device):
    """Copies of the modules and tensors above on `device`, made before RepOps runs (a copy
    between devices is the caller's; RepOps never makes one)."""
    for obj in (_LSTM, _GRU, _RNN, _MHA, _MEAN, _VAR, _CAUSAL):
        _ON.setdefault((id(obj), torch.device(device).type), copy.deepcopy(obj).to(device))


def _at(obj, x):
    """A sample's module or tensor where x is (the copy on_device made, off the CPU)."""
    return obj if x.device.type == "cpu" else _ON[(id(obj), x.device.type)]

SAMPLES.update({
    "conv2d_groups_stride": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2),
                             lambda: (_x(2, 4, 7, 7), _x(6, 2, 3, 3, seed=1), _x(6, seed=2))),
    "conv1d_dilation": (lambda x, w: F.conv1d(x, w, padding=2, dilation=2),
                        lambda: (_x(3, 2, 9), _x(4, 2, 3, seed=1))),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b, padding=(0, 1, 1)),
               lambda: (_x(2, 2, 3, 4, 4), _x(3, 2, 2, 3, 3, seed=1), _x(3, seed=2))),
    "batch_norm_train": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                         lambda: (_x(4, 3, 5, 5), _x(3, seed=1), _x(3, seed=2))),
    "batch_norm_eval": (lambda x, w, b: F.batch_norm(x, _at(_MEAN, x), _at(_VAR, x), w, b),
                        lambda: (_x(4, 3, 6), _x(3, seed=1), _x(3, seed=2))),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), lambda: (_x(3, 4, 5, 2), _x(4, seed=1), _x(4, seed=2))),
    "max_pool2d_ceil": (lambda x: F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True), lambda: (_x(2, 3, 8, 7),)),
    "max_pool1d_dilation": (lambda x: F.max_pool1d(x, 2, 1, dilation=2), lambda: (_x(2, 3, 9),)),
    "avg_pool2d_pad_excluded": (lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False),
                                lambda: (_x(2, 3, 7, 6),)),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 2, ceil_mode=True), lambda: (_x(2, 3, 9),)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda: (_x(2, 3, 6, 6),)),
    "where_min_max_clamp": (lambda a, b: torch.where(a > 0, a, b) + torch.minimum(a, b) * torch.maximum(a, b)
                            + a.clamp(-1, 2) - b.clamp(min=0.5), lambda: (_x(5, 6), _x(5, 6, seed=1))),
    "reciprocal": (lambda a: torch.reciprocal(a), lambda: (_x(4, 6, lo=0.5),)),
    "vector_norm": (lambda a: torch.linalg.vector_norm(a, dim=-1) + a.norm(), lambda: (_x(4, 6),)),
    "gather": (lambda a, i: torch.gather(a, 1, i), lambda: (_x(4, 6), _i(4, 3, hi=6))),
    "gather_leading_dim": (lambda a, i: torch.gather(a, 0, i), lambda: (_x(5, 3, 2), _i(4, 2, 2, hi=5))),
    "index_select_index": (lambda a, i: a.index_select(0, i) * a[i][:, :1],
                           lambda: (_x(6, 4), torch.tensor([5, 0, 0, 3]))),
    "index_put_accumulate": (lambda a, v, i: a.index_put((i,), v, accumulate=True),
                             lambda: (_x(6, 4), _x(5, 4, seed=1), torch.tensor([1, 4, 1, 1, 0]))),
    "flip_roll_repeat": (lambda a: a.flip(0) + a.roll(2, 1) - a[:2].repeat(2, 1), lambda: (_x(4, 5),)),
    "pad_constant": (lambda a: F.pad(a, (2, 1, 0, 3), value=0.5) * 2, lambda: (_x(3, 4),)),
    "slice_select_scatter": (lambda a, b, c: torch.slice_scatter(a, b, 1, 1, 3) + torch.select_scatter(a, c, 0, 2),
                             lambda: (_x(4, 5), _x(4, 2, seed=1), _x(5, seed=2))),
    "sdpa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    lambda: (_x(2, 2, 5, 4), _x(2, 2, 5, 4, seed=1), _x(2, 2, 5, 4, seed=2))),
    "sdpa_float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3),
                        lambda: (_x(2, 5, 4), _x(2, 6, 4, seed=1), _x(2, 6, 4, seed=2), _x(5, 6, seed=3))),
    "multihead_attention": (lambda x: _at(_MHA, x)(x, x, x, attn_mask=_at(_CAUSAL, x), need_weights=False)[0],
                            lambda: (_x(2, 5, 8),)),
    "lstm_bidirectional_proj": (lambda x: _at(_LSTM, x)(x)[0], lambda: (_x(2, 4, 4),)),
    "gru_rnn": (lambda x: _at(_RNN, x)(_at(_GRU, x)(x)[0][..., :4])[0], lambda: (_x(3, 2, 4),)),
    "embedding_padding_idx": (lambda w, i: F.embedding(i, w, padding_idx=2),
                              lambda: (_x(6, 3), torch.tensor([[2, 1, 2], [5, 0, 1]]))),
})

SAMPLES.update({  # #38: reductions into indexed targets (duplicates in source order), products, order statistics
    "scatter_reduce_sum_mean": (lambda a, s, i: a.scatter_reduce(0, i, s, "sum")
                                * a.scatter_reduce(-2, i[:, :3], s[:, :3], "mean", include_self=False),
                                lambda: (_x(5, 4), _x(3, 4, seed=1), _i(3, 4, hi=5))),
    "scatter_reduce_prod_amax_amin": (lambda a, s, i: a.scatter_reduce(1, i, s, "prod")
                                      + a.scatter_reduce(1, i, s, "amax", include_self=False)
                                      - a.scatter_reduce(1, i, s, "amin"),
                                      lambda: (_x(3, 6), _x(2, 4, seed=1), _i(2, 4, hi=6))),
    "index_reduce_scatter_small": (lambda a, s, i: a.index_reduce(0, i, s, "amin") * a.index_reduce(0, i, s, "mean")
                                   + a.index_reduce(0, i, s, "prod", include_self=False)
                                   + a.scatter(0, i[:3].reshape(3, 1).expand(3, 2), s[:3, :2]),
                                   lambda: (_x(4, 3), _x(5, 3, seed=1), torch.tensor([3, 0, 3, 1, 3]))),
    "prod_addbmm_logcumsumexp": (lambda a, b, c: a.prod(1) + torch.addbmm(a[:, 0], b, c, beta=0.5).sum(0)
                                 + torch.logcumsumexp(a, 1)[:, -1],
                                 lambda: (_x(4, 5), _x(3, 2, 6, seed=1), _x(3, 6, 4, seed=2))),
    "cummax_kthvalue_median_mode": (lambda a: torch.cummax(a, 1).values.sum(1) + torch.cummin(a, 0).values[0]
                                    + torch.kthvalue(a, 2, 1).values + torch.median(a, 1).values
                                    + torch.nanmedian(a, 1).values + a.median(),  # (mode: refuses NaN, the variants' specials)
                                    lambda: (_x(4, 4),)),
    "searchsorted": (lambda a, b: a * torch.searchsorted(torch.sort(b).values, a).float()
                     + a * torch.searchsorted(b.sort(1).values, a[:3, :2], right=True).float().sum() + b[:, :5],
                     lambda: (_x(3, 5), _x(3, 7, seed=1))),
    "matmul_of_vectors": (lambda a, b: (a[0] @ b)[:3] + b @ a[:, 0], lambda: (_x(4, 3), _x(3, 4, seed=1))),  # squeeze_
})


# -- integer and bool ops (docs/NUMERICS.md §13): name -> (function, inputs); torch's own result is
# the spec's, bit for bit and dtype for dtype ---------------------------------------------------------------
_BIG = torch.tensor([[3, -7, 2 ** 62 + 5, 0], [2 ** 63 - 1, 9, -2 ** 63, -1]])
_DIV = torch.tensor([2, -3, 5, -1])
_MASK = torch.tensor([[True, False, True, True], [False, False, True, False]])
_IDS = torch.tensor([[5, 0, 17, 3, 0], [1, 1, 0, 9, 4]])

INTEGER_SAMPLES = {
    "add_sub_mul_wrap": (lambda a, b: (a + b) * 3 - torch.sub(a, b, alpha=2), lambda: (_BIG, _DIV)),
    "rsub_neg_abs": (lambda a: (5 - a) + (-a).abs(), lambda: (_BIG,)),
    "floor_trunc_division": (lambda a, b: torch.stack([a // b, torch.div(a, b, rounding_mode="trunc"), a % b,
                                                       torch.fmod(a, b)]), lambda: (_BIG, _DIV)),
    "bitwise": (lambda a, b: (a & b) | (a ^ 6) | ~b, lambda: (_BIG, _DIV)),
    "compare": (lambda a, b: torch.stack([a == b, a != 0, a < b, a <= b, a > 1, a >= b]), lambda: (_BIG, _DIV)),
    "compare_with_a_float": (lambda a, m: torch.cat([a > 0.5, a == float(2 ** 62), a != 3.0, m < 0.5, a <= -7.5,
                                                     a.int() >= 2.5, a + 2 ** 24 == 16777216.0]), lambda: (_BIG, _MASK)),
    "min_max_clamp": (lambda a, b: torch.minimum(a, b) + torch.maximum(a, b) + a.clamp(-5, 5), lambda: (_BIG, _DIV)),
    "where_masked_fill": (lambda a, m: torch.where(m, a, -1) + a.masked_fill(~m, -100), lambda: (_BIG, _MASK)),
    "bool_logic": (lambda m, a: torch.stack([m & (a > 0), m | ~m, m ^ (a < 0), torch.logical_and(m, a),
                                             torch.logical_not(a), m + m, m * m]), lambda: (_MASK, _BIG)),
    "casts": (lambda a, m: torch.cat([a.int().long(), m.long(), a.bool().long(), (a.int() + 1).long()]),
              lambda: (_BIG, _MASK)),
    "cast_to_float32": (lambda a, m: torch.cat([a.float(), m.float(), a.int().float()]), lambda: (_BIG, _MASK)),
    "int32_arithmetic": (lambda a, b: a.int() * b.int() + 7, lambda: (_BIG, _DIV)),
    "sum_any_all": (lambda a, m: torch.cat([a.sum(0), m.sum(1), a.sum().reshape(1), m.any(0), m.all(1),
                                            m.any().reshape(1), m.sum(0, keepdim=True)[0]]), lambda: (_BIG, _MASK)),
    "index_by_two_tensors": (lambda m: m[torch.arange(2)[:, None, None], torch.arange(4)[None, None, :]],
                             lambda: (_MASK,)),
    "index_negative": (lambda a: a[:, torch.tensor([3, -1, 0, -4])], lambda: (_BIG,)),
    "label_rule": (lambda ids: (ids[:, 0] + 3) % 2, lambda: (_IDS,)),
    "padding_mask_positions": (lambda ids: (ids != 0).long() * (torch.arange(5) + 1), lambda: (_IDS,)),
    "cumsum_positions": (lambda ids: torch.cat([torch.cumsum(ids != 0, 1) * (ids != 0), torch.cumsum(ids, 0),
                                                torch.cumsum(ids.int(), 1)]), lambda: (_IDS,)),
    "cumsum_wraps_and_one_long": (lambda a: torch.cat([torch.cumsum(a, 1), torch.cumsum(a[:, :1], 1)], 1),
                                  lambda: (_BIG,)),
    "gather_along_dims": (lambda a, m: torch.cat([torch.gather(a, 1, torch.tensor([[3, 0], [1, 1]])),
                                                  torch.gather(m, 0, torch.tensor([[1, 0, 0, 1]])).long().expand(2, -1)],
                                                 1), lambda: (_BIG, _MASK)),
    "in_place": (lambda a, m: a.clone().add_(1).masked_fill_(m, 0).bitwise_not_(), lambda: (_BIG, _MASK)),
}


# -- the op families of issues #38/#39 (activations, losses, advanced indexing) --------------------------
from nn_samples import NN_INTEGER_SAMPLES, NN_SAMPLES  # noqa: E402

SAMPLES.update(NN_SAMPLES)
from pool_samples import POOL_SAMPLES  # noqa: E402

SAMPLES.update(POOL_SAMPLES)
INTEGER_SAMPLES.update(NN_INTEGER_SAMPLES)

from loss_samples import LOSS_SAMPLES  # noqa: E402  (transposed conv, class losses, EmbeddingBag, distances)

SAMPLES.update(LOSS_SAMPLES)
