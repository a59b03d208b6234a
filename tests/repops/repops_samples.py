"""One sample table drives the RepOps op tests: name -> (function of tensors, input maker).
Each function is ordinary PyTorch; under repops.deterministic() it runs RepOps kernels."""
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
