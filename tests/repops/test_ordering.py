"""Order statistics and order-resolved writes (repops/reference/ordering.py) mean what torch
means: stable sort and argsort (NaN last ascending, first descending; -0 and +0 tie), max/min
with the first index on ties, topk as the stable sort's first k, scatter and x[idx] = v with the
last write winning, on values full of ties, NaNs, signed zeros and infinities, on the CPU backend
and the reference; each index result a kernel output of the decomposition."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import repops
from repops.reference import prims as P

_VALUES = [0.0, -0.0, 1.0, -1.0, 2.5, float("nan"), float("inf"), -float("inf"), 1e-40]


@st.composite
def _tensors(draw):
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    n = 1
    for s in shape:
        n *= s
    vals = draw(st.lists(st.sampled_from(_VALUES), min_size=n, max_size=n))
    return torch.tensor(vals).reshape(shape), draw(st.integers(-len(shape), len(shape) - 1))


def _bits(t):
    return t.contiguous().view(torch.int32) if t.dtype == torch.float32 else t


def _both(fn):
    """fn's results on the CPU backend and the reference (compared outside RepOps)."""
    out = []
    for backend in ("cpu", "reference"):
        with repops.deterministic(backend):
            out.append(fn())
    return out


@settings(max_examples=60, deadline=None)
@given(_tensors(), st.booleans())
def test_sort_and_argsort_are_torchs_stable_sort_bit_for_bit(case, descending):
    x, dim = case
    want = torch.sort(x, dim=dim, descending=descending, stable=True)
    for got in _both(lambda: torch.sort(x, dim=dim, descending=descending, stable=True)):
        assert torch.equal(_bits(got.values), _bits(want.values)) and torch.equal(got.indices, want.indices)
    for got in _both(lambda: torch.argsort(x, dim=dim, descending=descending, stable=True)):
        assert torch.equal(got, want.indices)


@settings(max_examples=60, deadline=None)
@given(_tensors(), st.booleans())
def test_max_min_argmax_take_the_first_index_and_nan_wins(case, keepdim):
    x, dim = case
    for name in ("max", "min"):
        want = getattr(torch, name)(x, dim=dim, keepdim=keepdim)
        arg = getattr(torch, "arg" + name)
        for got in _both(lambda: getattr(torch, name)(x, dim=dim, keepdim=keepdim)):
            torch.testing.assert_close(got.values, want.values, equal_nan=True, rtol=0, atol=0)
            assert torch.equal(got.indices, want.indices), (name, x, dim)
        for got in _both(lambda: (arg(x, dim=dim, keepdim=keepdim), arg(x))):
            assert torch.equal(got[0], arg(x, dim=dim, keepdim=keepdim)) and torch.equal(got[1], arg(x))


@settings(max_examples=40, deadline=None)
@given(_tensors(), st.booleans(), st.data())
def test_topk_is_the_stable_sorts_first_k(case, largest, data):
    x, dim = case
    k = data.draw(st.integers(0, x.shape[dim]))
    want = torch.sort(x, dim=dim, descending=largest, stable=True)
    for got in _both(lambda: torch.topk(x, k, dim=dim, largest=largest)):
        assert torch.equal(_bits(got.values), _bits(want.values.narrow(dim, 0, k)))
        assert torch.equal(got.indices, want.indices.narrow(dim, 0, k))
    torch.testing.assert_close(torch.topk(x, k, dim=dim, largest=largest).values, want.values.narrow(dim, 0, k),
                               equal_nan=True, rtol=0, atol=0)  # torch's values: the same


def test_writes_to_one_target_resolve_to_the_last_source_as_torchs_cpu_loop():
    x = torch.arange(12.0).reshape(3, 4)
    idx = torch.tensor([[0, 0, 3], [2, 1, 2], [1, 1, 1]])
    src = -torch.arange(9.0).reshape(3, 3)
    rows = torch.tensor([0, 2, 0, -1])
    cases = [lambda: x.scatter(1, idx, src), lambda: x.scatter(1, idx, 7.5),
             lambda: x.index_put((rows,), torch.arange(16.0).reshape(4, 4)),
             lambda: x.index_put((rows, torch.tensor([1, 1, 1, 0])), torch.tensor([5.0, 6.0, 7.0, 8.0])),
             lambda: x.index_copy(0, torch.tensor([2, 0, 2]), -x), lambda: x.index_fill(1, torch.tensor([-1, 0]), 3.0)]
    for fn in cases:
        want = fn()
        for got in _both(fn):
            assert torch.equal(_bits(got), _bits(want))


def test_every_index_result_is_an_integer_kernel_output():
    """What a dispute needs: the int64 indices are the output of the decomposition's last
    integer kernel (no array the referee could only take on trust)."""
    x = torch.tensor([[3.0, 1.0, 3.0], [float("nan"), 0.0, -1.0]])
    for fn in (lambda: x.max(1).indices, lambda: x.sort(1).indices, lambda: x.topk(2, 1).indices,
               lambda: x.argmax()):
        with P.tape() as rec, repops.deterministic("reference"):
            got = fn()
        last = [out for _, _, out in rec if str(out.dtype) == "int64"][-1]  # the last int64 kernel output
        assert torch.equal(got, torch.from_numpy(last).reshape(got.shape))


def test_a_mode_too_long_for_the_pairwise_spec_is_refused():
    """(a sort of any length runs: a network above the pairwise spec, tests/repops/test_scatter_reduce.py)"""
    with pytest.raises(repops.UnsupportedOpError, match="O\\(n\\^2\\)"), repops.deterministic():
        torch.mode(torch.zeros(5000))


def test_empty_rows_and_empty_writes_give_torchs_empty_results():
    e, o, none = torch.zeros(0, 3), torch.zeros(1, 3), torch.zeros(0, dtype=torch.long)
    cases = [lambda: e.amax(1), lambda: e.amax(1, keepdim=True), lambda: e.argmax(1), lambda: e.max(1), lambda: e.sort(0),
             lambda: o.topk(0, 1), lambda: e.scatter(1, torch.zeros(0, 3, dtype=torch.long), 1.0),
             lambda: o.scatter(1, torch.zeros(1, 0, dtype=torch.long), 1.0), lambda: o.index_put((none,), torch.zeros(0, 3)),
             lambda: torch.tensor(2.0).max(0), lambda: torch.tensor(2.0).sort(), lambda: torch.tensor(2.0).argmax()]
    for fn in cases:
        want = fn()
        want = want if isinstance(want, tuple) else (want,)
        for got in _both(fn):
            got = got if isinstance(got, tuple) else (got,)
            assert all(a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(got, want))
