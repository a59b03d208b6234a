"""The empty-tensor, 0-dim, unbatched and None-size paths of the shared mechanisms (folds,
row operators, norms, pooling, dim-taking data movement), each once a wrong answer or a
foreign exception found by PyTorch's own test databases (issue #38): the same result as
native torch (shape, dtype, values, gradients) and the same bits on the CPU backend and the
reference; a result torch gives in another float dtype is RepOps' DTypeError."""
import pytest
import torch
import torch.nn.functional as F

import repops
from repops import DTypeError


def _run(fn, inputs, backend=None):
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    with repops.deterministic(backend) if backend else _nothing():
        out = fn(*xs)
        outs = out if isinstance(out, tuple) else (out,)
        wrt = [x for x in xs if x.requires_grad]
        grads = torch.autograd.grad(sum(o.sum() for o in outs), wrt, allow_unused=True)
    return [o.detach() for o in outs], grads


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _bits(t):
    return torch.empty(t.shape, dtype=t.dtype).copy_(t).reshape(-1).view(torch.uint8)


ln = lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b)  # noqa: E731
CASES = {
    # empty batches: the CPU norms skipped their kernel and returned np.empty's garbage as the
    # weight and bias gradients; folds reshaped with -1 (ambiguous when an axis is empty)
    "layer_norm_empty_batch": (ln, lambda: [torch.randn(0, 5), torch.randn(5), torch.randn(5)]),
    "rms_norm_empty_batch": (lambda x, w: F.rms_norm(x, (5,), w), lambda: [torch.randn(0, 5), torch.randn(5)]),
    "group_norm_empty_batch": (lambda x, w, b: F.group_norm(x, 2, w, b), lambda: [torch.randn(0, 4, 3),
                                                                                 torch.randn(4), torch.randn(4)]),
    "broadcast_add_empty": (lambda x, y: x + y, lambda: [torch.randn(0, 3), torch.randn(3)]),
    "broadcast_mul_empty": (lambda x, y: x * y, lambda: [torch.randn(2, 0, 3), torch.randn(1, 1, 3)]),
    "repeat_empty": (lambda x: x.repeat(2, 3), lambda: [torch.randn(0, 3)]),
    "tile_empty": (lambda x: torch.tile(x, (2,)), lambda: [torch.randn(3, 0)]),
    "sum_empty_dim": (lambda x: x.sum(1), lambda: [torch.randn(2, 0)]),
    # 0-dim: the CPU row kernels made a 0-d array 1-d (softmax of a 0-dim tensor had shape (1,));
    # a dim over a 0-dim tensor was `d % 0`
    "softmax_0dim": (lambda x: torch.softmax(x, 0), lambda: [torch.tensor(1.5)]),
    "log_softmax_0dim": (lambda x: torch.log_softmax(x, -1), lambda: [torch.tensor(1.5)]),
    "softmin_0dim": (lambda x: F.softmin(x, 0), lambda: [torch.tensor(1.5)]),
    "sum_0dim_dim": (lambda x: x.sum(0), lambda: [torch.tensor(1.5)]),
    "mean_0dim_dim_keepdim": (lambda x: x.mean(-1, keepdim=True), lambda: [torch.tensor(1.5)]),
    "gather_0dim": (lambda x: x.gather(0, torch.tensor(0)), lambda: [torch.tensor(1.5)]),
    "index_select_0dim": (lambda x: x.index_select(0, torch.tensor([0])), lambda: [torch.tensor(1.5)]),
    "index_add_0dim": (lambda x, s: x.index_add(0, torch.tensor(0), s), lambda: [torch.tensor(1.5), torch.tensor(2.)]),
    "scatter_add_0dim": (lambda x, s: x.scatter_add(0, torch.tensor(0), s),
                         lambda: [torch.tensor(1.5), torch.tensor(2.)]),
    "gather_empty_uint8_index": (lambda x: x.gather(1, torch.zeros(2, 0, dtype=torch.uint8)),
                                 lambda: [torch.randn(2, 3)]),
    "gather_empty_index_other_rank": (lambda x: x.gather(0, torch.zeros(2, 0, dtype=torch.uint8)),
                                      lambda: [torch.randn(5)]),
    # an expanded (stride-0) operand of torch's decompositions: diagonal_scatter's copies its
    # input with the same strides and writes the diagonal into it (the gradient of a sum)
    "diagonal_scatter_grad": (lambda x, s: torch.diagonal_scatter(x, s, 1), lambda: [torch.randn(3, 5),
                                                                                    torch.randn(3)]),
    "diagonal_scatter_expanded": (lambda x, s: torch.diagonal_scatter(x.sum().expand(4, 4), s),
                                  lambda: [torch.randn(2), torch.randn(4)]),
    # unbatched pooling ([C, *S]): the spatial axes were taken as shape[2:]
    "adaptive_avg_pool1d_unbatched": (lambda x: F.adaptive_avg_pool1d(x, 4), lambda: [torch.randn(8, 8)]),
    "adaptive_avg_pool2d_unbatched_none": (lambda x: F.adaptive_avg_pool2d(x, (None, 2)), lambda: [torch.randn(3, 4, 4)]),
    "adaptive_avg_pool3d_unbatched": (lambda x: F.adaptive_avg_pool3d(x, (2, 1, 2)), lambda: [torch.randn(2, 4, 2, 4)]),
    "avg_pool1d_unbatched": (lambda x: F.avg_pool1d(x, 2), lambda: [torch.randn(3, 8)]),
    "avg_pool2d_unbatched": (lambda x: F.avg_pool2d(x, 2, padding=1), lambda: [torch.randn(3, 4, 6)]),
    "avg_pool3d_unbatched": (lambda x: F.avg_pool3d(x, 2), lambda: [torch.randn(2, 4, 4, 2)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_edge_shape_matches_native_and_backends_agree(name):
    fn, make = CASES[name]
    torch.manual_seed(0)
    inputs = make()
    native, native_grads = _run(fn, inputs)
    cpu, cpu_grads = _run(fn, inputs, "cpu")
    ref, ref_grads = _run(fn, inputs, "reference")
    for a, b, c in zip(native, cpu, ref):
        assert (b.shape, b.dtype) == (a.shape, a.dtype)
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        assert torch.equal(_bits(b), _bits(c))
    for a, b, c in zip(native_grads, cpu_grads, ref_grads):
        assert (a is None) == (b is None)
        if a is not None:
            assert b.shape == a.shape
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
            assert torch.equal(_bits(b), _bits(c))


def test_layer_norm_empty_batch_weight_grads_are_zeros_every_run():
    """Once uninitialised memory (0.278, 2.84e13, ... a different value every run)."""
    for _ in range(3):
        _, (gx, gw, gb) = _run(ln, [torch.randn(0, 64), torch.randn(64), torch.randn(64)], "cpu")
        assert torch.equal(gw.abs(), torch.zeros(64)) and torch.equal(gb.abs(), torch.zeros(64))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
@pytest.mark.parametrize("op", [torch.exp, lambda a: a * a, lambda a: a + a, torch.sum])
def test_zero_dim_other_float_is_refused_not_float32(dtype, op):
    """A 0-dim float64/float16 tensor came back float32 (silently): torch's result dtype is
    not float32, so RepOps refuses it, as it does for larger tensors."""
    with repops.deterministic(), pytest.raises(DTypeError, match="float32 only"):
        op(torch.tensor(1.5, dtype=dtype))


def test_zero_dim_float64_next_to_float32_is_a_wrapped_scalar():
    """torch's promotion keeps float32 there: RepOps computes it (rounded once); next to a
    0-dim float32 it does not (float64): refused, whichever came first (the decision is cached
    by dtype and 0-dim-ness)."""
    x, two = torch.randn(3), torch.tensor(2.0, dtype=torch.float64)
    with repops.deterministic():
        y = x * two
        with pytest.raises(DTypeError):
            torch.tensor(1.5) * two
    assert y.dtype == torch.float32 and torch.equal(y, x * 2)


def test_batch_and_instance_norm_under_frozen_backend_flags():
    """torch's test databases freeze the backend flags on import; RepOps' cuDNN switch-off
    then raised RuntimeError."""
    frozen = torch.backends.flags_frozen()
    torch.backends.disable_global_flags()
    try:
        m, x, y = torch.nn.BatchNorm1d(3), torch.randn(4, 3), torch.randn(2, 3, 4)
        with repops.deterministic():
            assert m(x).shape == (4, 3)
            assert F.instance_norm(y).shape == (2, 3, 4)
        assert torch.backends.cudnn.enabled
    finally:  # (torch has no public way to unfreeze)
        vars(torch.backends)["__allow_nonbracketed_mutation_flag"] = not frozen


@pytest.mark.parametrize("shape", [(0, 5), (3, 0)])
@pytest.mark.parametrize("backend", ["cpu", "cuda-emu"])
def test_norms_of_empty_inputs_have_the_specs_bits_on_every_backend(backend, shape):
    """Every output of the norm kernels, statistics included (a node of a Verde trace), is the
    reference's: not what the allocator left when the kernel skipped the empty input."""
    x, w, b = torch.randn(*shape), torch.randn(shape[1]), torch.randn(shape[1])
    fns = (lambda x, w, b: torch.ops.aten.native_layer_norm(x, [shape[1]], w, b, 1e-5),
           lambda x, w, b: torch.ops.repops.rms_norm(x, w, 1e-5))
    for fn in fns:
        outs, grads = _run(lambda *a: tuple(o for o in fn(*a) if o.is_floating_point()), [x, w, b], backend)
        ref_outs, ref_grads = _run(lambda *a: tuple(o for o in fn(*a) if o.is_floating_point()), [x, w, b],
                                   "reference")
        for a, r in zip([*outs, *grads], [*ref_outs, *ref_grads]):
            assert (a is None) == (r is None)
            assert a is None or torch.equal(_bits(a), _bits(r))


def test_view_ops_by_torchs_decomposition_stay_views():
    """diagonal and unfold run torch's decomposition (as_strided): a write through the result
    reaches the base, as natively (a decomposition returning a copy is refused instead)."""
    x, y = torch.zeros(3, 3), torch.zeros(2, 4)
    with repops.deterministic():
        x.diagonal().add_(1.0)
        y.unfold(1, 2, 2).mul_(0.0).add_(2.0)
    assert torch.equal(x, torch.eye(3)) and torch.equal(y, torch.full((2, 4), 2.0))


def test_a_view_op_whose_decomposition_copies_is_refused(monkeypatch):
    import repops.mode as mode
    table = dict(mode._decompositions())
    view = table[torch.ops.aten.diagonal.default]
    table[torch.ops.aten.diagonal.default] = lambda *a, **k: torch.ops.aten.clone(view(*a, **k))
    monkeypatch.setattr(mode, "_decompositions", lambda: table)
    with repops.deterministic(), pytest.raises(repops.UnsupportedOpError, match="returns a copy, not a view"):
        torch.zeros(3, 3).diagonal()
