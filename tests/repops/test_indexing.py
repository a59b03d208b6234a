"""Advanced indexing means what it means in torch: x[i0, i1, ...] and index_put by any number
of integer index tensors (adjacent or not, broadcast, negative entries wrapped), on float and
integer data, on the compiled backend and the reference; an index outside [-n, n) is a fault
where torch raises; static positions outside their range are an IndexError, never a wrap."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import repops


def bits(t):
    return t.contiguous().view(torch.int32) if t.dtype == torch.float32 else t


@st.composite
def _indexing(draw):
    """x of 1-3 dims (sizes 1-4), a random subset of its dims indexed by integer tensors with
    entries in [-n, n) whose shapes broadcast, the rest full slices; int32 indices sometimes."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    dims = draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)).filter(any))
    bshape = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    seed = draw(st.integers(0, 2 ** 16))
    g = torch.Generator().manual_seed(seed)
    indices = []
    for n, used in zip(shape, dims):
        if not used:
            indices.append(None)
            continue
        s = [b if torch.rand(1, generator=g).item() < 0.7 else 1 for b in bshape]  # broadcast where 1
        i = torch.randint(-n, n, s, generator=g)
        indices.append(i.int() if torch.rand(1, generator=g).item() < 0.2 else i)
    while indices[-1] is None:
        indices.pop()  # (torch drops trailing full slices too)
    return torch.randn(shape, generator=g), indices


def _key(indices):
    """The Python subscript of aten's index list (None there is a full slice)."""
    return tuple(slice(None) if i is None else i for i in indices)


def _native_and(fn, backend="cpu"):
    want = fn()
    with repops.deterministic(backend):
        got = fn()
    return want, got


@settings(max_examples=60, deadline=None)
@given(_indexing())
def test_indexing_by_integer_tensors_is_torchs_bit_for_bit(case):
    x, indices = case
    for data in (x, (x * 100).long()):
        for backend in ("cpu", "reference"):
            want, got = _native_and(lambda: data[_key(indices)], backend)
            assert got.shape == want.shape and got.dtype == want.dtype and torch.equal(bits(got), bits(want))


@settings(max_examples=40, deadline=None)
@given(_indexing())
def test_index_put_accumulate_and_the_gradient_of_indexing_are_torchs(case):
    x, indices = case
    v = torch.randn(x[_key(indices)].shape, generator=torch.Generator().manual_seed(1))
    for backend in ("cpu", "reference"):
        want, got = _native_and(lambda: torch.ops.aten.index_put.default(x, indices, v, True), backend)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    xs = [x.clone().requires_grad_() for _ in range(2)]
    xs[0][_key(indices)].mul(v).sum().backward()
    with repops.deterministic():
        xs[1][_key(indices)].mul(v).sum().backward()
    torch.testing.assert_close(xs[1].grad, xs[0].grad, rtol=1e-6, atol=1e-6)


def test_the_negative_index_of_a_published_config_wraps():
    """Falcon's configs index x[..., [-2], :]: torch's meaning is the second-to-last row."""
    x = torch.randn(2, 3, 5, 4)
    with repops.deterministic():
        got = x[..., [-2], :]
    assert torch.equal(bits(got), bits(x[..., 3:4, :]))


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_an_index_outside_minus_n_to_n_is_a_fault_on_integer_data_too(backend):
    """Integer data: torch refuses; the reference backend used to read the gather's fill (0)."""
    ids = torch.arange(12).reshape(3, 4)
    for fn, element in ((lambda: ids[torch.tensor([0, 3])], 1), (lambda: ids[:, torch.tensor([-5])], 0),
                        (lambda: torch.gather(ids, 1, torch.tensor([[0], [4], [1]])), 1)):
        with pytest.raises((IndexError, RuntimeError)):
            fn()
        with pytest.raises(repops.IndexFault) as info, repops.deterministic(backend):
            fn()
        assert info.value.element == element


def test_a_select_scatter_position_outside_the_dim_is_an_error_not_a_wrap():
    """index 5 of a dim of 3 used to write row 5 % 3 = 2."""
    x = torch.zeros(3, 4)
    with pytest.raises(IndexError):
        torch.select_scatter(x, torch.ones(4), 0, 5)
    with pytest.raises(IndexError, match=r"index 5 is outside \[-3, 3\)"), repops.deterministic():
        torch.select_scatter(x, torch.ones(4), 0, 5)
    with repops.deterministic():
        got = torch.select_scatter(x, torch.ones(4), 0, -1)
    assert torch.equal(got, torch.select_scatter(x, torch.ones(4), 0, -1))


def test_a_bool_mask_index_of_a_float_tensor_is_refused_with_what_to_write():
    x = torch.randn(3, 4)
    with pytest.raises(repops.UnsupportedOpError, match="torch.where"), repops.deterministic():
        x[x > 0]


@pytest.mark.parametrize("backend", ["cpu", "reference", "cuda-emu"])
@pytest.mark.parametrize("shape,p,mask_shape", [((4, 5), 0, (4, 5)), ((2, 3, 4), 0, (2, 3)), ((2, 3, 4), 1, (3, 4)),
                                                ((2, 3, 4), 0, (2,)), ((2, 3, 4), 2, (4,))])
def test_a_bool_mask_write_of_one_value_is_torchs_bit_for_bit(backend, shape, p, mask_shape):
    """`x[mask] = v` with one value (Longformer's `mask[attention_mask == 2] = max`): no shape
    depends on the mask (a masked_fill), so RepOps defines it, out of place and in place, with
    torch's bits for a number, -0 and NaN, and the gradient of x is torch's."""
    g = torch.Generator().manual_seed(p + len(shape))
    x, m = torch.randn(shape, generator=g), torch.rand(mask_shape, generator=g) < 0.5
    key = (slice(None),) * p + (m,)
    for v in (torch.tensor(7.5), torch.tensor([-0.0]), torch.tensor(float("nan"))):
        want = x.clone()
        want[key] = v
        xg = x.clone().requires_grad_()
        (want_grad,) = torch.autograd.grad((torch.ops.aten.index_put(xg, [None] * p + [m], v) * x).sum(), xg)
        with repops.deterministic(backend):
            got, inplace = torch.ops.aten.index_put(x, [None] * p + [m], v), x.clone()
            inplace[key] = v
            (grad,) = torch.autograd.grad((torch.ops.aten.index_put(xg, [None] * p + [m], v) * x).sum(), xg)
        for t in (got, inplace):
            assert torch.equal(bits(t), bits(want)), (t, want)
        assert torch.equal(bits(grad), bits(want_grad))


def test_a_bool_mask_write_of_several_values_is_refused_with_what_to_write():
    x = torch.randn(3, 4)
    with pytest.raises(repops.UnsupportedOpError, match="torch.where"), repops.deterministic():
        x[x > 0] = torch.arange(12.0)[:int((x > 0).sum())]


def test_one_index_for_every_row_on_the_cuda_kernels():
    """x[:, [1]]: the gather's index is one value broadcast to every row (stride 0); the CUDA
    backend passed that one element and its kernel read past it (wrong values, emulated and on
    the GPU)."""
    x = torch.randn(3, 4, 2)
    with repops.deterministic("cuda-emu"):
        got = x[:, torch.tensor([1])]
    assert torch.equal(bits(got), bits(x[:, 1:2]))


_BY_DIM = {
    "softmax": lambda x, d: torch.softmax(x, d), "log_softmax": lambda x, d: torch.log_softmax(x, d),
    "sum": lambda x, d: x.sum(d), "sum_two_dims": lambda x, d: x.sum([d, 0]) if d % x.dim() else x.sum([d]),
    "mean_keepdim": lambda x, d: x.mean(d, keepdim=True), "amax": lambda x, d: x.amax(d),
    "max_dim": lambda x, d: torch.stack([x.max(d).values, x.max(d).indices.float()]),
    "argmin": lambda x, d: x.argmin(d, keepdim=True), "cumsum": lambda x, d: x.cumsum(d),
    "sort": lambda x, d: x.sort(dim=d, stable=True).values, "topk": lambda x, d: x.topk(1, d).indices,
    "gather": lambda x, d: torch.gather(x, d, torch.zeros_like(x, dtype=torch.long)),
    "index_select": lambda x, d: x.index_select(d, torch.tensor([0, x.shape[d] - 1])),
    "flip": lambda x, d: x.flip(d), "roll": lambda x, d: x.roll(1, d), "narrow": lambda x, d: x.narrow(d, 0, 1),
    "select_scatter": lambda x, d: torch.select_scatter(x, x.select(d, -1) * 2, d, 0),
    "slice_scatter": lambda x, d: torch.slice_scatter(x, x.narrow(d, 0, 1) * 3, d, -1),
    "scatter_add": lambda x, d: x.scatter_add(d, torch.zeros_like(x, dtype=torch.long), x),
    "index_add": lambda x, d: x.index_add(d, torch.zeros(x.shape[d], dtype=torch.long), x),
    "vector_norm": lambda x, d: torch.linalg.vector_norm(x, dim=d), "layer_norm_last": lambda x, d: F.layer_norm(
        x, x.shape[d % x.dim():]),
    "repeat_interleave": lambda x, d: x.repeat_interleave(2, d), "unbind_stack": lambda x, d: torch.stack(x.unbind(d), d),
}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_every_op_taking_a_dim_means_torchs_dim_negative_or_not(shape, data):
    """The negative-dim class of wrong answer, searched: each op by a dim in [-ndim, ndim)."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)))
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    for name, fn in _BY_DIM.items():
        want = fn(x, d)
        with repops.deterministic():
            got = fn(x, d)
        assert got.shape == want.shape and got.dtype == want.dtype, name
        torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-6, msg=name)
