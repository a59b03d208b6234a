"""Samples of the op families models in the wild need (issues #38/#39): activations, losses and
advanced indexing. repops_samples.SAMPLES includes them, so each runs every sample test (close
to native torch, CPU backend vs reference bit for bit on special, subnormal, signed-zero and
strided inputs, the emulated CUDA kernels, the referee's dtype and descriptor rules)."""
import torch
import torch.nn.functional as F


def _x(*shape, lo=-3.0, hi=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


def _i(*shape, hi, seed=0):
    return torch.randint(0, hi, shape, generator=torch.Generator().manual_seed(seed))


def _finite(x):
    """NaN -> 0 (a probability must be one: binary_cross_entropy faults on NaN, as torch refuses it)."""
    return torch.where(x == x, x, 0.0)


NN_SAMPLES = {
    "elu_selu_celu": (lambda a: F.elu(a, 0.7) + F.selu(a) * F.celu(a, 1.3), lambda: (_x(5, 7),)),
    "softplus_mish_logsigmoid": (lambda a: F.softplus(a) + F.softplus(a, 2.0, 1.5) * F.mish(a) - F.logsigmoid(a),
                                 lambda: (_x(5, 7, lo=-25, hi=25),)),
    "leaky_relu_hard_family": (lambda a: F.leaky_relu(a, 0.2) + F.hardswish(a) * F.hardsigmoid(a) + F.hardtanh(a, -2, 1.5)
                               - F.relu6(a * 3) + torch.sign(a) * a, lambda: (_x(6, 7, lo=-5, hi=5),)),
    "regression_losses": (lambda a, b: torch.stack([F.mse_loss(a, b), F.l1_loss(a, b, reduction="sum"),
                                                    F.smooth_l1_loss(a, b, beta=0.5), F.huber_loss(a, b, delta=0.7)])
                          + F.mse_loss(a, b, reduction="none")[0, :4], lambda: (_x(6, 4), _x(6, 4, seed=1))),
    # targets and weights from integer inputs (no gradient; the float variants leave them alone)
    "binary_cross_entropy": (lambda a, t, w: F.binary_cross_entropy(torch.sigmoid(_finite(a)), t.float() / 4.0)
                             + F.binary_cross_entropy(torch.sigmoid(_finite(a)), t.float() / 4.0, w[0].float() / 2.0, reduction="sum"),
                             lambda: (_x(5, 6), _i(5, 6, hi=5), _i(2, 6, hi=5, seed=1))),
    "bce_with_logits": (lambda a, t, w: F.binary_cross_entropy_with_logits(a, t.float() / 4.0)
                        + F.binary_cross_entropy_with_logits(a, t.float() / 4.0, weight=w[0].float() / 2.0, pos_weight=w[1].float() / 2.0,
                                                             reduction="none").sum(0),
                        lambda: (_x(5, 6), _i(5, 6, hi=5), _i(2, 6, hi=5, seed=1))),
    # index tensors are inputs (a sample's every tensor is an argument: tests/protocol/test_oprun.py)
    "index_two_tensors_last_token": (lambda a, r, i: a[r, i] * 2,
                                     lambda: (_x(4, 5, 3), torch.arange(4), torch.tensor([2, -1, 0, 4]))),
    "index_negative_list": (lambda a, i: a[..., i, :] + a[:, i[:1]].sum(), lambda: (_x(2, 3, 4, 2), torch.tensor([-2, 0]))),
    "index_put_two_tensors": (lambda a, v, i, j: torch.ops.aten.index_put.default(a, [None, i, j], v, True),
                              lambda: (_x(2, 4, 3), _x(2, 2, 3, seed=1), torch.tensor([[0], [-1]]), torch.tensor([1, 2, 1]))),
    "inplace_scatter_and_clamp": (lambda a, v, i, j: (a * 1).index_add_(0, i, v).scatter_add_(1, j, v[:, :2])
                                  .clamp_min_(-1.0).clamp_max_(a[0] + 1).cumsum_(1).pow_(2),
                                  lambda: (_x(4, 5), _x(2, 5, seed=1), torch.tensor([1, 3]), torch.tensor([[0, 4], [2, 2]]))),
    "pow_tensor_exponents": (lambda a, b, n: torch.pow(a.abs() + 0.5, b) + torch.pow(2.0, b) + (a.abs() + 0.1).pow(1.5)
                             + torch.pow(a[0, :1].abs() + 0.25, n.float()).sum(),   # ALiBi: base ** arange
                             lambda: (_x(4, 5), _x(4, 5, seed=1), torch.arange(1, 9))),
    "cumsum_cumprod": (lambda a: a.cumsum(1) * 0.5 + a.cumsum(-1)[:, -1:] + (a * 0.1 + 1).cumprod(0)
                       + a.cumsum(0), lambda: (_x(4, 9),)),
    "max_min_argmax": (lambda a: a.max(1).values + a.min(0, keepdim=True).values.sum() + a.amax(1) * a.argmax(1).float()
                       + a.max() - a.amin(0).sum() + a.argmin().float(), lambda: (_x(4, 6),)),
    "sort_topk_argsort": (lambda a: a.sort(1).values * 2 + a.topk(3, 1).values.sum(1, keepdim=True)
                          + a.sort(0, descending=True).indices.float() - a.argsort(1).float(), lambda: (_x(4, 6),)),
    "scatter_and_assignment_last_wins": (lambda a, v, i, j: a.scatter(1, i, v) + a.scatter(1, i, -1.5)
                                         + torch.ops.aten.index_put.default(a, [j], v[:3, :1], False),
                                         lambda: (_x(4, 5), _x(4, 2, seed=1), torch.tensor([[0, 4], [2, 2], [1, 0], [3, 3]]),
                                                  torch.tensor([0, 2, -4]))),
    "index_copy_fill_take": (lambda a, v, i, j: a.index_copy(0, i, v) + a.index_fill(1, j, 0.5) + torch.take(a, j).sum(),
                             lambda: (_x(4, 5), _x(2, 5, seed=1), torch.tensor([3, 1]), torch.tensor([-1, 2]))),
}

# integer data (docs/NUMERICS.md §13): torch's own result is the spec's, bit for bit
_LENGTHS = torch.tensor([[3, 1, 3, 0, -2], [0, 0, 5, 5, 1]])

NN_INTEGER_SAMPLES = {
    # Hugging Face's last non-pad token: (positions * mask).argmax(-1)
    "argmax_max_min_with_index": (lambda a: torch.stack([a.argmax(-1), a.argmin(-1), a.max(1).values, a.min(1).indices,
                                                          a.int().argmax(1).long(), (a != 0).int().argmax(-1).long()]),
                                  lambda: (_LENGTHS,)),
}
