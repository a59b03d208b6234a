"""The negative-index class of bug, searched with hypothesis: dims given from the end, index
values below zero, shifts and slices from the end, and axes of size 0 or 1 (broadcasting of
empty tensors), through the ops that take a dim or an index. RepOps must give native torch's
result (shape, dtype, values, gradients), or refuse with its own error where torch computes;
where torch raises, so must RepOps (any error: the input is invalid)."""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import repops
from repops.errors import RepOpsError


def _shape(draw, min_dims=1, max_dims=3):
    return tuple(draw(st.lists(st.integers(0, 3), min_size=min_dims, max_size=max_dims)))


@st.composite
def cases(draw):
    shape = _shape(draw)
    nd = len(shape)
    dim = draw(st.integers(-nd, nd - 1))
    n = shape[dim]
    kind = draw(st.sampled_from(sorted(_OPS)))
    seed = draw(st.integers(0, 2**16))
    return kind, shape, dim, n, seed


def _idx(g, n, shape):
    """Indices in [-n, n) (negative ones count from the end, where torch allows them)."""
    return torch.randint(-n, n, shape, generator=g) if n else torch.zeros(shape, dtype=torch.int64)


def _pos(g, n, shape):
    return torch.randint(0, n, shape, generator=g) if n else torch.zeros(shape, dtype=torch.int64)


_OPS = {
    "sum": lambda x, d, n, g: x.sum(d),
    "mean_keepdim": lambda x, d, n, g: x.mean(d, keepdim=True),
    "softmax": lambda x, d, n, g: torch.softmax(x, d),
    "log_softmax": lambda x, d, n, g: torch.log_softmax(x, d),
    "flip": lambda x, d, n, g: x.flip(d),
    "roll": lambda x, d, n, g: x.roll(int(torch.randint(-5, 5, (), generator=g)), d),
    "narrow_from_end": lambda x, d, n, g: x.narrow(d, -n, n) if n else x.narrow(d, 0, 0),
    "slice_negative": lambda x, d, n, g: x.transpose(0, d)[-n:max(-1, -n + 1) if n else None],
    "select_negative": lambda x, d, n, g: x.select(d, -1) if n else x.sum(d),
    "index_select": lambda x, d, n, g: x.index_select(d, _pos(g, n, (2,) if n else (0,))),
    "getitem_negative": lambda x, d, n, g: x.transpose(0, d)[_idx(g, n, (3,) if n else (0,))],
    "gather": lambda x, d, n, g: x.gather(d, _pos(g, n, x.shape)),
    "scatter_add": lambda x, d, n, g: x.scatter_add(d, _pos(g, n, x.shape), x * 2),
    "index_add": lambda x, d, n, g: x.index_add(d, _pos(g, n, (x.shape[d],)), x),
    "cat": lambda x, d, n, g: torch.cat([x, x * 2], d),
    "stack": lambda x, d, n, g: torch.stack([x, x], d),
    "unsqueeze_mul": lambda x, d, n, g: x.unsqueeze(d) * x.unsqueeze(d - 1 if d < 0 else d),
    "broadcast_sub": lambda x, d, n, g: x - x.sum(d, keepdim=True),
    "cumsum_or_refused": lambda x, d, n, g: x.cumsum(d),
    "movedim": lambda x, d, n, g: x.movedim(d, -1) * 3,
    "split": lambda x, d, n, g: torch.cat(x.split(2, d), d) * 1.5,
    "repeat": lambda x, d, n, g: x.repeat(*[2 if i == d % x.dim() else 1 for i in range(x.dim())]),
}


def _native(fn, x):
    x = x.detach().clone().requires_grad_()
    y = fn(x)
    (gx,) = torch.autograd.grad(y.sum(), x, allow_unused=True)
    return y.detach(), gx


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_dim_and_index_ops_match_native_or_refuse(case):
    kind, shape, dim, n, seed = case
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    fn = lambda t: _OPS[kind](t, dim, n, torch.Generator().manual_seed(seed))  # noqa: E731
    try:
        want = _native(fn, x)
    except Exception:  # noqa: BLE001 - torch rejects this input: RepOps must not compute it
        with pytest.raises(Exception):  # noqa: B017
            with repops.deterministic():
                _native(fn, x)
        return
    try:
        with repops.deterministic():
            got = _native(fn, x)
    except RepOpsError:
        return  # refused, with RepOps' own error
    for a, b in zip(want, got):
        assert (a is None) == (b is None), kind
        if a is not None:
            assert (b.shape, b.dtype) == (a.shape, a.dtype), (kind, shape, dim)
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, equal_nan=True, msg=f"{kind} {shape} dim={dim}")
