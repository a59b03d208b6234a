"""torch's random-number calls inside `repops.dropout_key(seed, step)`: the same bits on every
device, and every element recomputable alone, because each is a composition of ops RepOps
already defines over dropout's Philox bits (docs/NUMERICS.md §12, "Random numbers"). Outside a
key they are refused with the one message (NeedsRandomKey); a job's program carries its key
(offchain/protocol/program.py), so its draws settle on chain like any other node.

    u = rand:      bits b[i, k] (k < 24) = the philox keep bit of dropout's mask with p = 1/2
                   (the top bit of Philox word 0 at flat counter 24 i + k, this call's stream);
                   u[i] = sum_k b[i, k] * 2^-(k+1), exact: the 24-bit grid of [0, 1), as torch's
    randn:         Box-Muller on one draw u [2, n]: sqrt(-2 log(1 - u[0])) * cos(2pi * u[1])
    bernoulli(p):  (u < p) as float32, p in binary32 (a float p is rounded to it, as torch compares)
    randint(l, h): l + floor(r * (h - l) / 2^24), r = u * 2^24 the same bits as an int64 (integer kernels)
    uniform_(a, b) = u * (b - a) + a; normal_(m, s) = z * s + m (torch's own formulas)
    multinomial:   the inverse CDF, cumsum's order: how many of (probs @ triu(ones))_k are <= u * sum;
                   k > 1 samples without replacement: the k largest log(u_i) / p_i (Efraimidis-Spirakis)
    randperm(n):   a stable argsort of hi * 2^24 + lo, (hi, lo) one randint(0, 2^24) draw [2, n]

These are a spec, not torch's bits (torch's generators differ between CPU and CUDA anyway)."""
from __future__ import annotations

import math

import torch

from .errors import DTypeError, UnsupportedOpError
from .random import _KEY, NeedsDropoutKey

BITS = 24  # binary32's significand: u is exact
TWO_PI = 6.2831854820251465  # float32(2 pi)


class NeedsRandomKey(NeedsDropoutKey):
    """A random-number call with no key: torch's generator is not portable."""


def refused(what: str) -> UnsupportedOpError:
    """The one message for a random-number call RepOps cannot draw (mode.py uses it too)."""
    return NeedsRandomKey(
        f"{what}: random numbers inside repops.deterministic() (torch's generators differ between CPU and CUDA): "
        "draw random tensors (data, initial weights, noise) before entering the block and pass them in, or draw "
        "them from RepOps' portable generator: inside `with repops.dropout_key(seed, step):` (a job does this by "
        "itself) torch.rand, randn, randint, randperm, bernoulli, normal_, uniform_, multinomial and dropout are RepOps' own "
        "(docs/NUMERICS.md §12)")


def _key(what: str):
    key = _KEY.get()
    if key is None:
        raise refused(what)
    return key


def _shape(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = size[0]
    return tuple(int(s) for s in size)


def _float32(what: str, dtype) -> None:
    if dtype not in (None, torch.float32):
        raise DTypeError(f"{what} with dtype={dtype}: RepOps draws float32 only")


def _no_generator(what: str, generator) -> None:
    if generator is not None:
        raise UnsupportedOpError(f"{what} with a generator: inside repops.dropout_key the draws come from the key "
                                 "(seed, step, call), not from a torch.Generator; drop the generator argument")


def _bits(shape: tuple, device, what: str) -> torch.Tensor:
    """[n, 24] float32: 2 where Philox's bit is 1, else 0 (dropout's mask at p = 1/2), the next stream."""
    key = _key(what)
    ones = torch.ones((math.prod(shape), BITS), device=device)
    return torch.ops.repops.dropout(ones, key.step, key.seed, key.stream(), 0.5)[1]


def uniform(shape: tuple, device=None, what: str = "torch.rand") -> torch.Tensor:
    """rand(shape) from the block's key: the next stream, 24 Philox bits per element."""
    w = torch.tensor([2.0 ** -(k + 2) for k in range(BITS)], device=device)  # 2 * 2^-(k+2) = 2^-(k+1)
    return (_bits(shape, device, what) * w).sum(-1).reshape(shape)


def normal(shape: tuple, device=None, what: str = "torch.randn") -> torch.Tensor:
    """randn(shape): Box-Muller on one draw [2, n] (1 - u[0] is in [2^-24, 1]: the log is finite)."""
    n = math.prod(shape)
    u = uniform((2, n), device, what)
    return (torch.sqrt(torch.log(1.0 - u[0]) * -2.0) * torch.cos(u[1] * TWO_PI)).reshape(shape)


def bernoulli(p, shape: tuple | None = None, device=None, what: str = "torch.bernoulli") -> torch.Tensor:
    """1.0 with probability p (a float, or a float32 tensor of probabilities at the result's shape)."""
    if isinstance(p, torch.Tensor):
        _float32(what, p.dtype)
        shape, device = tuple(p.shape), p.device
    return (uniform(shape, device, what) < p).to(torch.float32)


def randint(low: int, high: int, shape: tuple, device=None, what: str = "torch.randint") -> torch.Tensor:
    n = high - low
    if n <= 0 or n > 1 << BITS:
        raise UnsupportedOpError(f"{what}({low}, {high}): RepOps draws ranges of 1 to 2^24 values")
    w = torch.tensor([1 << (BITS - 1 - k) for k in range(BITS)], device=device)
    r = ((_bits(shape, device, what) > 0).to(torch.int64) * w).sum(-1)  # rand's u * 2^24, as an integer
    return torch.div(r * n, 1 << BITS, rounding_mode="floor").reshape(shape) + low


def multinomial(probs: torch.Tensor, samples: int, replacement: bool = False,
                what: str = "torch.multinomial") -> torch.Tensor:
    """Category indices by the inverse CDF: c = probs @ triu(ones) (RepOps' matmul: the left
    fold of p_0..p_k, cumsum's order), t = u * c[K-1]; index = how many c_k <= t (a category
    of probability 0 is never drawn). Without replacement only one sample per row."""
    _float32(what, probs.dtype)
    if probs.dim() not in (1, 2) or probs.shape[-1] == 0:
        raise UnsupportedOpError(f"{what}: probabilities must be 1-D or 2-D with at least one category, "
                                 f"got {list(probs.shape)}")
    k = probs.shape[-1]
    if samples <= 0 or (not replacement and samples > k):
        raise UnsupportedOpError(f"{what}: cannot draw {samples} samples from {k} categories"
                                 + ("" if replacement else " without replacement"))
    rows = probs.reshape(-1, k)
    torch._assert_async(((rows >= 0) & (rows < math.inf)).all(),  # (a NaN fails both)
                        f"{what}: a probability is negative, infinite or NaN (torch refuses it)")
    torch._assert_async((rows.sum(-1) > 0).all(), f"{what}: a row of probabilities sums to 0 (torch refuses it)")
    if not replacement and samples > 1:
        return _without_replacement(rows, samples, what).reshape(*probs.shape[:-1], samples)
    c = rows @ torch.triu(torch.ones((k, k), device=probs.device))
    t = uniform((c.shape[0], samples), probs.device, what) * c[:, k - 1:]
    index = (c[:, None, :] <= t[:, :, None]).sum(-1).clamp(max=k - 1)
    return index.reshape(*probs.shape[:-1], samples)


def _without_replacement(rows: torch.Tensor, samples: int, what: str) -> torch.Tensor:
    """Efraimidis-Spirakis: each category's key log(u) / p (u one uniform each; p = 0 gives
    -inf), the `samples` largest keys in decreasing order (topk): the same law as drawing one
    category at a time without putting it back, in the order drawn. A row with fewer
    categories of positive probability than samples is torch's refusal, here a fault claim."""
    torch._assert_async(((rows > 0).sum(-1) >= samples).all(),
                        f"{what}: {samples} samples without replacement from a row with fewer categories of "
                        "positive probability (torch refuses it)")
    keys = torch.log(uniform(tuple(rows.shape), rows.device, what)) / rows
    return torch.topk(keys, samples, dim=-1).indices


def randperm(n: int, device=None, what: str = "torch.randperm") -> torch.Tensor:
    """A uniform permutation of 0..n-1: a stable argsort of 48-bit keys hi * 2^24 + lo, from one
    randint(0, 2^24) draw [2, n] (ties, left in index order, have probability about n^2 / 2^49)."""
    if n < 0 or n > 1 << BITS:
        raise UnsupportedOpError(f"{what}({n}): RepOps draws permutations of 0 to 2^24 elements")
    hi, lo = randint(0, 1 << BITS, (2, n), device, what)
    return torch.argsort(hi * (1 << BITS) + lo, stable=True)


# -- torch's calls, as RepOpsFunctions sees them -------------------------------------------------

def _rand(*size, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    _no_generator("torch.rand", generator), _float32("torch.rand", dtype)
    return uniform(_shape(size or (kw["size"],)), device).requires_grad_(requires_grad)


def _randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    _no_generator("torch.randn", generator), _float32("torch.randn", dtype)
    return normal(_shape(size or (kw["size"],)), device).requires_grad_(requires_grad)


def _like(draw, what):
    def run(x, *, dtype=None, device=None, requires_grad=False, **kw):
        _float32(what, dtype or x.dtype)
        return draw(tuple(x.shape), device or x.device, what).requires_grad_(requires_grad)
    return run


def _randint(*args, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    """torch.randint(high, size) or (low, high, size), any of them by keyword."""
    _no_generator("torch.randint", generator)
    if dtype not in (None, torch.int64):
        raise DTypeError(f"torch.randint with dtype={dtype}: RepOps draws int64 only")
    args = list(args)
    size = kw["size"] if "size" in kw else args.pop()
    bounds = args + [kw[k] for k in ("low", "high") if k in kw]
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    return randint(int(low), int(high), _shape((size,)), device)


def _bernoulli(input, p=None, *, generator=None, out=None, **kw):
    _no_generator("torch.bernoulli", generator)
    if p is None:
        return bernoulli(input)
    return bernoulli(float(p), tuple(input.shape), input.device)


def _bernoulli_(x, p=0.5, *, generator=None):
    _no_generator("Tensor.bernoulli_", generator), _float32("Tensor.bernoulli_", x.dtype)
    b = bernoulli(p if isinstance(p, torch.Tensor) else float(p), tuple(x.shape), x.device, "Tensor.bernoulli_")
    return x.copy_(b.expand_as(x) if b.shape != x.shape else b)


def _uniform_(x, a=0.0, b=1.0, *, generator=None, **kw):
    a, b = kw.get("from", a), kw.get("to", b)
    _no_generator("Tensor.uniform_", generator), _float32("Tensor.uniform_", x.dtype)
    return x.copy_(uniform(tuple(x.shape), x.device, "Tensor.uniform_") * (float(b) - float(a)) + float(a))


def _normal_(x, mean=0.0, std=1.0, *, generator=None):
    _no_generator("Tensor.normal_", generator), _float32("Tensor.normal_", x.dtype)
    return x.copy_(normal(tuple(x.shape), x.device, "Tensor.normal_") * float(std) + float(mean))


def _normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, **kw):
    _no_generator("torch.normal", generator), _float32("torch.normal", dtype)
    tensors = [t for t in (mean, std) if isinstance(t, torch.Tensor)]
    if tensors:
        shape = torch.broadcast_shapes(*(t.shape for t in tensors))
        return normal(tuple(shape), tensors[0].device, "torch.normal") * std + mean
    return normal(_shape((size,)), device, "torch.normal") * float(std) + float(mean)


def _randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    _no_generator("torch.randperm", generator)
    if dtype not in (None, torch.int64, torch.int32):
        raise DTypeError(f"torch.randperm with dtype={dtype}: RepOps draws int64 (or int32) permutations")
    p = randperm(int(n), device)
    return p if dtype in (None, torch.int64) else p.to(dtype)


def _multinomial(input, num_samples, replacement=False, *, generator=None, **kw):
    _no_generator("torch.multinomial", generator)
    return multinomial(input, int(num_samples), bool(replacement))


def functions() -> dict:
    """What RepOpsFunctions routes here: torch's random-number calls by the function torch calls."""
    T = torch.Tensor
    table = {torch.rand: _rand, torch.randn: _randn, torch.randint: _randint, torch.bernoulli: _bernoulli,
             T.bernoulli: _bernoulli, T.bernoulli_: _bernoulli_, T.uniform_: _uniform_, T.normal_: _normal_,
             torch.normal: _normal, torch.multinomial: _multinomial, T.multinomial: _multinomial,
             torch.randperm: _randperm,
             torch.rand_like: _like(uniform, "torch.rand_like"),
             torch.randn_like: _like(normal, "torch.randn_like")}
    return table
