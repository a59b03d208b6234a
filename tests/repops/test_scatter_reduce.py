"""Reductions into indexed targets, products, order statistics and in-place views
(repops/aten_reduce.py, repops/aten_order.py) against torch natively: scatter_reduce and
index_reduce combine duplicates in increasing source position from self (include_self) or
torch's start value, so sums, means and products are torch's CPU bits; scatter into an index
smaller than self; cummax/cummin with torch's tie rule; kthvalue/median/mode; searchsorted as
torch's binary search (NaN and unsorted sequences included); sort of any length; on the CPU
backend and the reference, the same bits on 1 and 2 threads, every index an integer kernel's
output."""
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import repops
from repops.models.quick_train import num_threads
from repops.reference import ordering as O
from repops.reference import prims as P
from test_ordering import _both  # (fn's results on the CPU backend and the reference)

NAN, INF = float("nan"), float("inf")
_VALUES = [0.0, -0.0, 1.0, -1.0, 2.5, 3e38, NAN, INF, -INF, 1e-40, 1e8]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # index_reduce is "beta"
        yield


def _same(got, want, zeros_tie=False):
    """The same shape, dtype, NaN positions and bits (zeros_tie: -0 == +0, for max/min, where
    torch keeps the first of two zeros and IEEE maximum takes +0)."""
    got, want = (got if isinstance(got, (tuple, list)) else (got,)), (want if isinstance(want, (tuple, list)) else (want,))
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
        if a.dtype != torch.float32:
            assert torch.equal(a, b), (a, b)
            continue
        assert torch.equal(a.isnan(), b.isnan()), (a, b)
        num = ~a.isnan()
        if zeros_tie:
            assert torch.equal(a[num], b[num]), (a, b)
        else:
            assert torch.equal(a[num].view(torch.int32), b[num].view(torch.int32)), (a, b)


@st.composite
def _scatter_case(draw):
    """self [n0, n1], an index no larger than it but along dim (targets with duplicates), src."""
    shape = [draw(st.integers(1, 4)), draw(st.integers(1, 4))]
    dim = draw(st.sampled_from([0, 1, -1, -2]))
    d = dim % 2
    ishape = [draw(st.integers(0, shape[k])) if k != d else draw(st.integers(0, 5)) for k in range(2)]
    vals = lambda n: draw(st.lists(st.sampled_from(_VALUES), min_size=n, max_size=n))  # noqa: E731
    x = torch.tensor(vals(shape[0] * shape[1])).reshape(shape)
    idx = torch.tensor(draw(st.lists(st.integers(0, shape[d] - 1), min_size=ishape[0] * ishape[1],
                                     max_size=ishape[0] * ishape[1])), dtype=torch.long).reshape(ishape)
    sshape = [ishape[0] + draw(st.integers(0, 1)), ishape[1] + draw(st.integers(0, 1))]
    src = torch.tensor(vals(sshape[0] * sshape[1])).reshape(sshape)
    return x, dim, idx, src


@settings(max_examples=50, deadline=None)
@given(_scatter_case(), st.sampled_from(["sum", "prod", "mean", "amax", "amin"]), st.booleans())
def test_scatter_reduce_is_torchs_cpu_loop_bit_for_bit(case, reduce, include_self):
    x, dim, idx, src = case
    fn = lambda: x.scatter_reduce(dim, idx, src, reduce, include_self=include_self)  # noqa: E731
    want = fn()
    for got in _both(fn):
        _same(got, want, zeros_tie=reduce in ("amax", "amin"))


@settings(max_examples=30, deadline=None)
@given(_scatter_case())
def test_scatter_with_an_index_smaller_than_self_writes_the_last_source(case):
    x, dim, idx, src = case
    for fn in (lambda: x.scatter(dim, idx, src), lambda: x.scatter(dim, idx, -7.5)):
        want = fn()
        for got in _both(fn):
            _same(got, want)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.sampled_from([0, 1, -1]), st.integers(0, 6),
       st.sampled_from(["prod", "mean", "amax", "amin"]), st.booleans(), st.data())
def test_index_reduce_is_torchs_cpu_loop_bit_for_bit(n0, n1, dim, m, reduce, include_self, data):
    x = torch.tensor(data.draw(st.lists(st.sampled_from(_VALUES), min_size=n0 * n1, max_size=n0 * n1))).reshape(n0, n1)
    d = dim % 2
    idx = torch.tensor(data.draw(st.lists(st.integers(0, x.shape[d] - 1), min_size=m, max_size=m)), dtype=torch.long)
    sshape = [n0, n1]
    sshape[d] = m
    src = torch.tensor(data.draw(st.lists(st.sampled_from(_VALUES), min_size=sshape[0] * sshape[1],
                                          max_size=sshape[0] * sshape[1]))).reshape(sshape)
    fn = lambda: x.index_reduce(dim, idx, src, reduce, include_self=include_self)  # noqa: E731
    want = fn()
    for got in _both(fn):
        _same(got, want, zeros_tie=reduce in ("amax", "amin"))


def test_duplicates_sum_in_source_order_where_the_order_decides_the_result():
    """(1e8 + 1) + 1 - 1e8 = 0 in binary32, 1e8 + (1 + 1 - 1e8) = 8: torch's CPU loop is the first
    (self, then the sources in increasing position), also on its expanded-index path."""
    x = torch.tensor([[1e8, 1e8]])
    src = torch.tensor([[1.0, 1.0], [1.0, 1.0], [-1e8, -1e8]])
    for idx in (torch.zeros(3, 2, dtype=torch.long), torch.zeros(3, 1, dtype=torch.long).expand(3, 2)):
        for include_self in (True, False):
            want = x.scatter_reduce(0, idx, src, "sum", include_self=include_self)
            for got in _both(lambda: x.scatter_reduce(0, idx, src, "sum", include_self=include_self)):
                _same(got, want)
    assert x.scatter_reduce(0, torch.zeros(3, 2, dtype=torch.long), src, "sum")[0, 0] == 0  # (the order matters)


def test_0_dim_empty_and_in_place_forms_are_torchs():
    s, i0 = torch.tensor(2.0), torch.tensor(0)
    e = torch.zeros(0, 3, dtype=torch.long)
    x = torch.arange(6.0).reshape(2, 3)
    cases = [lambda: s.scatter_reduce(0, i0, torch.tensor(5.0), "prod"),
             lambda: s.index_reduce(0, torch.tensor([0]), torch.tensor(-1.0), "amin"),
             lambda: x.scatter_reduce(0, e, x, "mean"), lambda: x.index_reduce(1, torch.zeros(0, dtype=torch.long),
                                                                                torch.zeros(2, 0), "prod"),
             lambda: x.clone().scatter_reduce_(-1, torch.tensor([[2, 2]]), -x, "sum", include_self=False),
             lambda: x.clone().index_reduce_(-2, torch.tensor([1, 1, 0]), x.repeat(3, 1)[:3], "mean")]
    for fn in cases:
        want = fn()
        for got in _both(fn):
            _same(got, want)


def test_an_index_out_of_range_faults_and_a_bad_reduce_is_refused():
    x = torch.zeros(3, 2)
    with pytest.raises(repops.IndexFault), repops.deterministic():
        x.scatter_reduce(0, torch.tensor([[3, 0]]), torch.ones(1, 2), "sum")
    with pytest.raises(repops.IndexFault), repops.deterministic():
        x.index_reduce(0, torch.tensor([-1]), torch.ones(1, 2), "amax")


def test_gradients_are_torchs_to_rounding():
    torch.manual_seed(0)
    x, src = torch.randn(6, 4), torch.randn(5, 4)
    idx = torch.randint(0, 6, (5, 4))
    for reduce in ("sum", "mean", "prod", "amax", "amin"):
        def run():
            a, b = x.clone().requires_grad_(), src.clone().requires_grad_()
            out = a.scatter_reduce(0, idx, b, reduce, include_self=True)
            return torch.autograd.grad((out * torch.arange(24.0).reshape(6, 4)).sum(), (a, b))
        want = run()
        with repops.deterministic():
            got = run()
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_the_same_bits_on_1_and_2_threads():
    torch.manual_seed(1)
    x, src = torch.randn(64, 300), torch.randn(200, 300)
    idx = torch.randint(0, 64, (200, 300))
    long = torch.randn(3, 9000)
    long[0, ::7] = 0.5
    long[1, ::11] = NAN

    def run():
        with repops.deterministic():
            return (x.scatter_reduce(0, idx, src, "mean"), x.scatter_reduce(0, idx, src, "amax", include_self=False),
                    torch.sort(long, stable=True), torch.cummax(long, 1), torch.prod(x[:4], 1))
    with num_threads(1):
        one = run()
    with num_threads(2):
        two = run()
    for a, b in zip(torch.utils._pytree.tree_leaves(one), torch.utils._pytree.tree_leaves(two)):
        assert torch.equal(a.view(torch.int32) if a.is_floating_point() else a,
                           b.view(torch.int32) if b.is_floating_point() else b)


# -- in-place views -----------------------------------------------------------------------------------------------
def test_in_place_view_ops_change_selfs_metadata_as_torch():
    def views():
        t = torch.arange(12.0).reshape(1, 3, 4)
        out = [t.squeeze_(0).clone(), t.unsqueeze_(-1).clone(), t.transpose_(0, 1).clone()]
        u = torch.ones(3, 1)
        out += [u.t_().clone(), u.squeeze_().clone(), torch.arange(4.0) @ torch.ones(4, 2), torch.ones(2, 4) @ torch.arange(4.0)]
        return out, t.shape, t.stride()
    want = views()
    with repops.deterministic():
        got = views()
    assert got[1:] == want[1:]
    _same(got[0], want[0])


# -- order statistics --------------------------------------------------------------------------------------------------
@st.composite
def _rows(draw):
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=2))
    n = int(np.prod(shape))
    vals = draw(st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, NAN, INF]), min_size=n, max_size=n))
    return torch.tensor(vals).reshape(shape), draw(st.integers(-len(shape), len(shape) - 1))


@settings(max_examples=60, deadline=None)
@given(_rows())
def test_cummax_cummin_take_torchs_last_tied_position_and_nan(case):
    x, dim = case
    for name in ("cummax", "cummin"):
        want = getattr(torch, name)(x, dim)
        for got in _both(lambda: getattr(torch, name)(x, dim)):
            _same(tuple(got), tuple(want))


def _distinct(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randperm(int(np.prod(shape)), generator=g).float().reshape(shape) * 0.37 - 3


def test_kthvalue_median_mode_are_torchs_on_distinct_values_and_nan():
    x = _distinct((4, 7), 0)
    y = x.clone()
    y[1, 3], y[2, 0], y[2, 5] = NAN, NAN, NAN
    cases = [lambda: torch.kthvalue(x, 3, 1), lambda: torch.kthvalue(x, 4, 0, keepdim=True), lambda: torch.median(x, -1),
             lambda: torch.median(x), lambda: torch.nanmedian(y, 1), lambda: torch.nanmedian(y),
             lambda: torch.median(y, 1), lambda: torch.median(y), lambda: torch.mode(x, 0),
             lambda: torch.mode(torch.tensor([[2.0, 2.0, 1.0, 1.0, 3.0], [-0.0, 5.0, 0.0, 4.0, 4.0]]), 1),
             lambda: torch.kthvalue(torch.tensor(1.5), 1), lambda: torch.median(torch.tensor(-0.0), 0)]
    for fn in cases:
        want = fn()
        for got in _both(fn):
            _same(tuple(got) if isinstance(got, tuple) else got, tuple(want) if isinstance(want, tuple) else want)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_mode_of_a_tensor_holding_nan_is_a_fault_claim(backend):
    """torch's mode sorts with `<` (no order with NaN): on [nan, -3.5] it returns NaN, on other
    rows a number; its value there depends on its sort, so RepOps faults (rule domain, at the
    NaN's element: a claim an honest trainer makes) rather than differ."""
    with pytest.raises(repops.DomainFault, match="NaN") as e, repops.deterministic(backend):
        torch.mode(torch.tensor([[1.0, 2.0], [NAN, -3.5]]), 1)
    assert (e.value.rule, e.value.element) == ("domain", 2)


def test_among_equal_values_the_stable_sorts_position_is_taken():
    """torch picks by nth_element here ("not necessarily the first occurrence"); RepOps' rule is
    the stable sort's: the k-th smallest is the one the stable order puts k-th."""
    x = torch.tensor([[2.0, 1.0, 2.0, 1.0, 2.0]])
    with repops.deterministic():
        assert torch.kthvalue(x, 2, 1).indices.item() == 3 and torch.kthvalue(x, 4, 1).indices.item() == 2
        assert torch.median(x, 1).indices.item() == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([-1.0, 0.0, 1.0, 2.0, 3.0, NAN, -INF]), min_size=0, max_size=9),
       st.lists(st.sampled_from([-2.0, -1.0, 0.0, 1.5, 2.0, 3.0, NAN, INF]), min_size=1, max_size=6),
       st.booleans(), st.booleans())
def test_searchsorted_is_torchs_binary_search_also_on_nan_and_unsorted(seq, values, right, sort_it):
    s = torch.tensor(seq) if seq else torch.zeros(0)
    s = torch.sort(s).values if sort_it else s
    v = torch.tensor(values)
    for fn in (lambda: torch.searchsorted(s, v, right=right), lambda: torch.searchsorted(s, v[0], right=right),
               lambda: torch.searchsorted(s, v.reshape(1, -1), out_int32=True, side="right" if right else "left"),
               lambda: torch.searchsorted(s, v, sorter=torch.argsort(s, stable=True))):
        want = fn()
        for got in _both(fn):
            assert got.dtype == want.dtype and torch.equal(got, want), (s, v, got, want)


def test_sort_longer_than_the_rank_spec_is_torchs_stable_sort():
    torch.manual_seed(4)
    x = torch.randint(-20, 20, (2, 5000)).float()
    x[0, ::13] = NAN
    x[1, ::17] = -INF
    for descending in (False, True):
        want = torch.sort(x, dim=1, descending=descending, stable=True)
        for got in _both(lambda: torch.sort(x, dim=1, descending=descending, stable=True)):
            _same(tuple(got), tuple(want))


def test_every_index_result_is_an_integer_kernel_output():
    x = torch.tensor([[3.0, 1.0, 3.0, 0.5], [NAN, 0.0, -1.0, 0.0]])
    for fn in (lambda: x.cummax(1).indices, lambda: x.kthvalue(2, 1).indices, lambda: x.median(1).indices,
               lambda: x.nanmedian(1).indices, lambda: x[:1].mode(1).indices,
               lambda: torch.searchsorted(torch.tensor([0.0, 1.0, 3.0]), x)):
        with P.tape() as rec, repops.deterministic("reference"):
            got = fn()
        last = [out for _, _, out in rec if str(out.dtype) == "int64"][-1]
        assert torch.equal(got, torch.from_numpy(last).reshape(got.shape))


def test_network_and_rank_sorts_agree_bit_for_bit():
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 7, 64, 100):
        x = rng.integers(-2, 3, size=(3, n)).astype(np.float32)
        x[rng.random((3, n)) < 0.2] = np.nan
        for descending in (False, True):
            a, b = O.sort_by_rank(x, descending), O.sort_by_network(x, descending)
            assert np.array_equal(a[0].view(np.int32), b[0].view(np.int32)) and np.array_equal(a[1], b[1])


# -- products, batches, whole-tensor comparisons, allocation ------------------------------------------------------------
def test_prod_addbmm_logcumsumexp_allclose_equal_are_torchs():
    torch.manual_seed(2)
    x, b1, b2, c = torch.randn(3, 4, 5), torch.randn(3, 4, 6), torch.randn(3, 6, 5), torch.randn(5)
    z = torch.tensor([[-INF, -INF, 1.0, NAN, 2.0], [INF, -INF, INF, 0.0, -0.0]])
    cases = [(lambda: x.prod(), 1e-6), (lambda: x.prod(-1, keepdim=True), 1e-6), (lambda: torch.tensor([]).prod(), 0),
             (lambda: torch.addbmm(c, b1[:, :, :6], b2, beta=0.5, alpha=2.0), 1e-5),
             (lambda: torch.addbmm(c, b1[:0], b2[:0]), 0), (lambda: torch.logcumsumexp(x, 1), 1e-5),
             (lambda: torch.logcumsumexp(z, -1), 0)]
    for fn, tol in cases:
        want = fn()
        for got in _both(fn):
            if tol:
                torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)
            else:
                _same(got, want)  # (exact: the bits, -0 included)
    pairs = [(x, x + 1e-6), (x, x + 1e-2), (z, z), (x, x[:1])]
    for a, b in pairs:
        for kw in ({}, {"equal_nan": True}, {"rtol": 0.1, "atol": 0.0}):
            if a.shape == b.shape:
                assert _both(lambda: torch.allclose(a, b, **kw)) == [torch.allclose(a, b, **kw)] * 2
        assert _both(lambda: torch.equal(a, b)) == [torch.equal(a, b)] * 2


def test_resize_as_that_would_grow_is_refused_and_empty_permuted_is_zeros():
    with repops.deterministic():
        t = torch.zeros(2, 3)
        assert t.resize_as_(torch.zeros(3, 2)).shape == (3, 2)
        e = torch.empty_permuted((2, 3, 4), (0, 2, 1))
        assert e.stride() == torch.empty_permuted((2, 3, 4), (0, 2, 1)).stride() and not e.any()
        with pytest.raises(repops.UnsupportedOpError, match="uninitialised"):
            t.resize_as_(torch.zeros(4, 4))


def test_a_reduction_with_too_many_terms_is_refused_before_it_allocates():
    with pytest.raises(repops.UnsupportedOpError, match="terms"), repops.deterministic():
        torch.zeros(1, 9000).scatter_reduce(1, torch.zeros(1, 8000, dtype=torch.long), torch.ones(1, 8000), "sum")


def test_scatter_add_with_an_infinite_source_is_torchs_and_touches_no_other_target():
    """scatter_add was onehot(idx)^T @ src over x's flat positions: 0 * inf = NaN in every other
    target. Now scatter_reduce's sum: torch's values, and its order ((x + s1) + s2) bit for bit."""
    x = torch.tensor([[1e8, 0.0], [2.0, -0.0], [0.0, 3.0]])
    idx = torch.tensor([[0, 1], [0, 1], [0, 2]])
    src = torch.tensor([[1.0, INF], [1.0, NAN], [-1e8, -INF]])
    for fn in (lambda: x.scatter_add(0, idx, src), lambda: x.clone().scatter_add_(-2, idx[:2], src),
               lambda: torch.tensor(1.0).scatter_add(0, torch.tensor(0), torch.tensor(INF))):
        want = fn()
        for got in _both(fn):
            _same(got, want)
