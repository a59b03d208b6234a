"""grid_sample (grid_sampler_2d/3d + backward), masked_scatter and quantile/nanquantile under
RepOps (repops/aten_misc.py) against torch natively: values and gradients to rounding, the
gradient rule at the border where autograd's clamp would differ, empty and broadcast shapes,
the refusals where torch's own kernels disagree, the same bits on 1 and 2 threads and on the
CPU backend vs the numpy reference and the emulated CUDA backend; a job's graph settles."""
import contextlib
import itertools

import pytest
import torch
import torch.nn.functional as F

import repops
from repops.errors import UnsupportedOpError
from repops.models.quick_train import num_threads


def _g(seed):
    return torch.Generator().manual_seed(seed)


def bits(t):
    return t.detach().contiguous().view(torch.int32)


def _run(fn, inputs, on, backend="cpu"):
    xs = [x.clone().requires_grad_() for x in inputs]
    with repops.deterministic(backend) if on else contextlib.nullcontext():
        out = fn(*xs)
        w = (torch.arange(out.numel()) % 5 - 2).float().reshape(out.shape)
        grads = torch.autograd.grad((out * w).sum(), xs)
    return [out.detach(), *grads]


def _close(mine, theirs):
    """To rounding: a gradient that cancels to ~0 (bicubic's grid gradient sums terms of either
    sign) is compared against the scale of the whole result."""
    for a, b in zip(mine, theirs):
        assert a.shape == b.shape
        scale = max(1.0, float(torch.nan_to_num(b, nan=0.0).abs().max())) if b.numel() else 1.0
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * scale, equal_nan=True)


GRID_2D = list(itertools.product((0, 1, 2), (0, 1, 2), (False, True)))  # mode, padding, align_corners
GRID_3D = list(itertools.product((0, 1), (0, 1, 2), (False, True)))


@pytest.mark.parametrize("mode,padding,align", GRID_2D)
def test_grid_sampler_2d_close_to_torch(mode, padding, align):
    g = _g(mode * 6 + padding * 2 + align)
    a, grid = torch.randn(2, 3, 5, 7, generator=g), torch.rand(2, 4, 6, 2, generator=g) * 4 - 2
    fn = lambda a, grid: torch.grid_sampler_2d(a, grid, mode, padding, align)  # noqa: E731
    _close(_run(fn, (a, grid), True), _run(fn, (a, grid), False))


@pytest.mark.parametrize("mode,padding,align", GRID_2D)
def test_an_infinite_or_nan_pixel_reaches_only_the_samples_that_weigh_it(mode, padding, align):
    """A corner outside the input (zeros padding) or of weight 0 was its clamped pixel times 0:
    an inf or NaN pixel made every sample near the border NaN, where torch never reads it."""
    g = _g(200 + mode * 6 + padding * 2 + align)
    a, grid = torch.randn(1, 2, 4, 5, generator=g), torch.rand(1, 3, 6, 2, generator=g) * 3 - 1.5
    a[0, 0, 0, 0], a[0, 1, 3, 4] = float("nan"), float("inf")
    fn = lambda a, grid: torch.grid_sampler_2d(a, grid, mode, padding, align)  # noqa: E731
    mine, native = _run(fn, (a, grid), True)[0], _run(fn, (a, grid), False)[0]  # (forward: torch's
    # gradients with respect to the grid are NaN beside a NaN pixel either way)
    assert torch.equal(mine.isnan(), native.isnan()) and torch.equal(mine.isinf(), native.isinf())
    _close(mine.nan_to_num(posinf=0.0, neginf=0.0), native.nan_to_num(posinf=0.0, neginf=0.0))


@pytest.mark.parametrize("mode,padding,align", GRID_3D)
def test_grid_sampler_3d_close_to_torch(mode, padding, align):
    g = _g(100 + mode * 6 + padding * 2 + align)
    a, grid = torch.randn(2, 2, 3, 4, 5, generator=g), torch.rand(2, 2, 3, 4, 3, generator=g) * 8 - 4
    fn = lambda a, grid: torch.grid_sampler_3d(a, grid, mode, padding, align)  # noqa: E731
    _close(_run(fn, (a, grid), True), _run(fn, (a, grid), False))


@pytest.mark.parametrize("padding,align", [(1, False), (1, True), (2, False), (2, True)])
def test_grid_gradient_at_the_bounds_is_torchs(padding, align):
    """Coordinates exactly on the border (and beyond, clipped onto it): torch's kernels give the
    grid a gradient of 0 there (clip_coordinates_set_grad); autograd's clamp would pass 1."""
    a = torch.randn(1, 2, 4, 5, generator=_g(7))
    grid = torch.tensor([-1.0, 1.0, -1.125, 1.125, 0.0, -3.0, 3.0, 0.5]).reshape(1, 2, 2, 2)
    fn = lambda a, grid: F.grid_sample(a, grid, padding_mode=("zeros", "border", "reflection")[padding],  # noqa: E731
                                       align_corners=align)
    mine, theirs = _run(fn, (a, grid), True), _run(fn, (a, grid), False)
    _close(mine, theirs)
    assert torch.equal(mine[2] == 0, theirs[2] == 0)


def test_nearest_gives_the_grid_a_zero_gradient_not_none():
    a, grid = torch.randn(1, 1, 3, 3, generator=_g(1)), torch.rand(1, 2, 2, 2, generator=_g(2)) * 2 - 1
    mine = _run(lambda a, g: F.grid_sample(a, g, mode="nearest", align_corners=False), (a, grid), True)
    assert torch.equal(bits(mine[2]), bits(torch.zeros_like(grid)))


@pytest.mark.parametrize("shapes", [((0, 2, 3, 3), (0, 2, 2, 2)), ((1, 2, 3, 3), (1, 0, 4, 2)),
                                    ((2, 0, 3, 3), (2, 2, 2, 2))])
def test_grid_sample_of_empty_tensors(shapes):
    a, grid = torch.randn(*shapes[0]), torch.rand(*shapes[1]) * 2 - 1
    fn = lambda a, g: F.grid_sample(a, g, align_corners=True)  # noqa: E731
    _close(_run(fn, (a, grid), True), _run(fn, (a, grid), False))


@pytest.mark.parametrize("value,padding", [(float("nan"), 0), (float("inf"), 1), (-3e38, 0), (2048.0, 2)])
def test_grids_where_torchs_kernels_disagree_are_refused(value, padding):
    grid, a = torch.zeros(1, 2, 2, 2), torch.randn(1, 1, 3, 3)
    grid[0, 1, 0, 1] = value
    with pytest.raises(repops.DomainFault, match="grid coordinate"), repops.deterministic():
        torch.grid_sampler_2d(a, grid, 0, padding, False)


def test_a_value_check_of_a_composite_is_a_fault_claim_the_dispute_finds():
    """The checks on values (a NaN grid here) are ops of the step (torch._assert_async, RepOps'
    definition: rule `domain`): a trainer meets a fault it can claim and decompose to its
    kernel, never an error that stops it mid-run."""
    from offchain.dispute.oprun import FAULT_KERNEL, OpRun
    from offchain.protocol.trace import StepRecorder
    a, grid = torch.randn(1, 1, 3, 3), torch.zeros(1, 2, 2, 2)
    grid[0, 1, 0, 1] = float("nan")
    rec = StepRecorder([a, grid], [], chunk=16)
    with pytest.raises(repops.DomainFault), repops.deterministic("cpu", trace=rec):
        F.grid_sample(a, grid, align_corners=False)
    node, inputs = rec.faulted()
    assert node.op == "aten._assert_async.msg"
    run = OpRun(node.structure(), inputs, 16)
    kernels = run.kernels()
    k, e, rule = run.fault
    assert kernels[k].name == FAULT_KERNEL and (e, rule) == (0, "domain")


@pytest.mark.parametrize("what", ["grid_2d", "grid_3d", "masked_scatter", "quantile"])
def test_same_bits_on_one_and_two_threads_and_on_the_reference(what):
    g = _g(11)
    fn, inputs = {
        "grid_2d": (lambda a, gr: F.grid_sample(a, gr, mode="bicubic", padding_mode="reflection", align_corners=False),
                    (torch.randn(2, 4, 16, 16, generator=g), torch.rand(2, 8, 8, 2, generator=g) * 3 - 1.5)),
        "grid_3d": (lambda a, gr: F.grid_sample(a, gr, padding_mode="border", align_corners=True),
                    (torch.randn(2, 4, 8, 8, 8, generator=g), torch.rand(2, 6, 6, 6, 3, generator=g) * 3 - 1.5)),
        "masked_scatter": (lambda x, s: x.masked_scatter(x > 0.3, s),
                           (torch.randn(64, 256, generator=g), torch.randn(64, 256, generator=g))),
        "quantile": (lambda x: torch.quantile(x, torch.tensor([0.1, 0.5, 0.93]), dim=1),
                     (torch.randn(64, 301, generator=g),)),
    }[what]
    runs = []
    for n in (1, 2):
        with num_threads(n):
            runs.append(_run(fn, inputs, True))
    runs.append(_run(fn, inputs, True, backend="reference"))
    for other in runs[1:]:
        assert all(torch.equal(bits(a), bits(b)) for a, b in zip(runs[0], other))
    _close(runs[0], _run(fn, inputs, False))


@pytest.mark.parametrize("what", ["grid_bicubic", "grid_3d", "masked_scatter", "segment_max"])
def test_emulated_cuda_backend_gives_the_cpu_bits(what):
    g = _g(13)
    fn, inputs = {
        "grid_bicubic": (lambda a, gr: F.grid_sample(a, gr, mode="bicubic", padding_mode="reflection"),
                         (torch.randn(1, 2, 5, 6, generator=g), torch.rand(1, 3, 4, 2, generator=g) * 2 - 1)),
        "grid_3d": (lambda a, gr: F.grid_sample(a, gr, padding_mode="border", align_corners=True),
                    (torch.randn(1, 2, 3, 4, 3, generator=g), torch.rand(1, 2, 2, 3, 3, generator=g) * 3 - 1.5)),
        "masked_scatter": (lambda x, s: x.masked_scatter(x > 0.3, s),
                           (torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g))),
        "segment_max": (lambda x: torch.segment_reduce(x, "max", lengths=torch.tensor([2, 0, 3])),
                        (torch.randn(5, 3, generator=g),)),
    }[what]
    cpu, emu = _run(fn, inputs, True), _run(fn, inputs, True, backend="cuda-emu")
    assert all(torch.equal(bits(a), bits(b)) for a, b in zip(cpu, emu))


def test_reflection_far_outside_needs_no_int8_cast():
    """More than 127 reflections: the parity of the flips is a float fmod, not torch's
    decomposition's cast to int8 (no integer dtype RepOps defines, §13: a native node a chain
    cannot settle, which saturates on a GPU where the CPU wraps). Integer-valued coordinates
    (259 -> 130 flips: even, 127 saturated; 999 -> 500, 1001 -> 501, -1001 -> 500) land exactly
    on input pixels: torch's bits."""
    x = torch.randn(1, 2, 2, 2, generator=_g(11))
    grid = torch.tensor([[[[259.0, 1001.0], [999.0, -1001.0], [1001.0, 259.0]]]])
    dtypes = set()

    def seen(func, args, kwargs, out):
        outs = out if isinstance(out, (tuple, list)) else (out,)
        dtypes.update(t.dtype for t in outs if isinstance(t, torch.Tensor))
    call = lambda: F.grid_sample(x, grid, padding_mode="reflection", align_corners=True)  # noqa: E731
    with repops.deterministic(trace=seen):
        got = call()
    assert dtypes and torch.int8 not in dtypes, dtypes
    assert torch.equal(bits(got), bits(call()))


# -- masked_scatter ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["full", "broadcast_mask", "broadcast_self", "all_false", "all_true", "scalar_mask"])
def test_masked_scatter_is_torchs(case):
    g = _g(3)
    x, s = torch.randn(5, 6, generator=g), torch.randn(40, generator=g)
    mask = {"full": torch.randn(5, 6, generator=g) > 0, "broadcast_mask": torch.randn(6, generator=g) > 0,
            "broadcast_self": torch.randn(4, 5, 6, generator=g) > 0, "all_false": torch.zeros(5, 6, dtype=torch.bool),
            "all_true": torch.ones(5, 6, dtype=torch.bool), "scalar_mask": torch.tensor(True)}[case]
    if case == "broadcast_self":
        s = torch.randn(130, generator=g)
    fn = lambda x, s: x.masked_scatter(mask, s)  # noqa: E731
    mine, theirs = _run(fn, (x, s), True), _run(fn, (x, s), False)
    assert all(torch.equal(bits(a), bits(b)) for a, b in zip(mine, theirs))  # data movement: torch's bits


def test_masked_scatter_below_autograd_and_masked_selects_backward():
    g = _g(4)
    x, s, m = torch.randn(4, 5, generator=g), torch.randn(20, generator=g), torch.randn(4, 5, generator=g) > 0
    with repops.deterministic(), torch.inference_mode():
        got = torch.ops.aten.masked_scatter(x, m, s)
    assert torch.equal(bits(got), bits(x.masked_scatter(m, s)))
    fn = lambda x: torch.masked_select(x, m)  # noqa: E731
    mine, theirs = _run(fn, (x,), True), _run(fn, (x,), False)
    assert all(torch.equal(bits(a), bits(b)) for a, b in zip(mine, theirs))


def test_masked_scatter_with_too_few_source_elements_is_refused_as_torch_does():
    with pytest.raises(repops.DomainFault, match="more ones than the source"), repops.deterministic():
        torch.zeros(4).masked_scatter(torch.ones(4, dtype=torch.bool), torch.ones(3))
    with pytest.raises(RuntimeError, match="elements of source"):
        torch.zeros(4).masked_scatter(torch.ones(4, dtype=torch.bool), torch.ones(3))


def test_masked_scatter_below_autograd_with_too_few_source_elements_is_a_fault_claim():
    """aten.masked_scatter's kernels check the count as the last source index (its integer
    cumsum), a fault claim: no host read of the mask's count, no error that stops a step."""
    for n in (3, 0):
        with pytest.raises(repops.DomainFault, match="more ones than the source"), repops.deterministic(), \
                torch.inference_mode():
            torch.ops.aten.masked_scatter(torch.zeros(4), torch.ones(4, dtype=torch.bool), torch.ones(n))
    with repops.deterministic(), torch.inference_mode():  # exactly enough: no claim
        got = torch.ops.aten.masked_scatter(torch.zeros(4), torch.ones(4, dtype=torch.bool), torch.arange(4.0))
    assert torch.equal(bits(got), bits(torch.arange(4.0)))


def test_masked_scatter_of_an_empty_source():
    x = torch.randn(3, 2)
    with repops.deterministic():
        got = x.masked_scatter(torch.zeros(3, 2, dtype=torch.bool), torch.empty(0))
    assert torch.equal(bits(got), bits(x))


# -- quantile / nanquantile ----------------------------------------------------------------------------------------
_VALUES = torch.tensor([0.0, -0.0, 1.0, 1.0, 2.5, -3.0, float("nan"), 7.0, 1.0, -3.0])


@pytest.mark.parametrize("fn", [torch.quantile, torch.nanquantile])
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("nan", [False, True])
def test_quantile_is_torchs_with_ties_and_nans(fn, interpolation, nan):
    g = _g(5)
    x = _VALUES[torch.randint(0, len(_VALUES), (6, 9), generator=g)]
    if not nan:
        x = torch.nan_to_num(x, nan=0.5)
    x[5] = float("nan")  # one row all... with a NaN at least
    q = torch.tensor([0.0, 0.25, 0.5, 0.77, 1.0])
    call = lambda x: fn(x, q, dim=1, keepdim=True, interpolation=interpolation)  # noqa: E731
    mine, theirs = _run(call, (x,), True), _run(call, (x,), False)
    _close(mine, theirs)


def test_quantile_of_a_scalar_q_and_a_flattened_input():
    x = torch.randn(3, 4, 5, generator=_g(6))
    for call in (lambda x: torch.quantile(x, 0.3), lambda x: torch.nanquantile(x, 0.9, dim=-1)):
        _close(_run(call, (x,), True), _run(call, (x,), False))


# -- histogram / histogramdd ---------------------------------------------------------------------------------------
_EDGES = {"sorted": torch.tensor([-1.0, 0.0, 0.5, 0.5, 2.0]), "unsorted": torch.tensor([0.0, -1.0, 2.0, 1.5]),
          "one_bin": torch.tensor([-0.25, 0.25])}


def _hist_same(call):
    theirs = call()
    with repops.deterministic():
        mine = call()
    def flat(r):
        return [t for x in (r if isinstance(r, tuple) else (r,)) for t in (x if isinstance(x, (list, tuple)) else [x])]
    mine, theirs = flat(mine), flat(theirs)
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("bins", ["3", "7_range", "sorted", "unsorted", "one_bin"])
@pytest.mark.parametrize("weighted,density", [(False, False), (True, False), (False, True), (True, True)])
def test_histogram_is_torchs_with_values_on_the_edges(bins, weighted, density):
    """Values exactly on edges (0, 0.5, 2, the data's own extremes), ties, and edges torch accepts
    unsorted (its binary search, step for step)."""
    g = _g(8)
    x = torch.cat([torch.randn(40, generator=g), torch.tensor([0.0, 0.5, 0.5, 2.0, -1.0, 1.5, -0.0])])
    w = torch.randn(x.shape, generator=g) if weighted else None
    arg = {"3": 3, "7_range": 7}.get(bins, _EDGES.get(bins))
    kw = {"range": (-1.0, 0.5)} if bins == "7_range" else {}
    _hist_same(lambda: torch.histogram(x, arg, weight=w, density=density, **kw))


def test_histogram_of_empty_constant_and_nan_inputs():
    _hist_same(lambda: torch.histogram(torch.empty(3, 0), 4))  # torch's default range [0, 1]
    _hist_same(lambda: torch.histogram(torch.full((5,), 2.5), 3))  # [v - 0.5, v + 0.5]
    _hist_same(lambda: torch.histogram(torch.tensor([1.0, float("nan"), 0.3]), _EDGES["sorted"]))  # NaN in no bin
    x = torch.tensor([1.0, float("nan")])
    with pytest.raises(repops.DomainFault, match="not finite"), repops.deterministic():  # a claim, not a host read
        torch.histogram(x, 3)


def test_value_checks_read_nothing_on_the_host_of_a_device():
    """On the CUDA path (the emulator, tensors as device tensors) a histogram's or histc's range
    from the data, a segment reduction and masked_scatter's kernels check values as fault
    claims queued on the device: no host read inside the step (they were two each), the CPU
    backend's bits."""
    from repops.backends import get
    from repops.cuda.counting import counting
    from repops.cuda.emulator import emulator
    get("cuda-emu")  # built and self-checked before anything is counted
    x = torch.tensor([0.0, 2.0, 0.5, 1.5, 2.0, -1.0])
    calls = [lambda: torch.histogram(x, 4)[0], lambda: torch.histc(x, 4),
             lambda: torch.segment_reduce(x, "max", lengths=torch.tensor([2, 0, 3, 1])),
             lambda: torch.ops.aten.masked_scatter(x, x > 0.7, torch.arange(6.0))]
    for i, call in enumerate(calls):
        with repops.deterministic("cpu"), torch.inference_mode():
            want = call()
        with counting(emulator()) as c, repops.deterministic("cuda-emu"), torch.inference_mode():
            got, syncs = call(), c.syncs
        assert syncs == 0 and torch.equal(bits(got), bits(want)), (i, syncs, c.sites.get("sync"))


@pytest.mark.parametrize("given", ["counts", "range", "tensors"])
def test_histogramdd_is_torchs(given):
    g = _g(9)
    x, w = torch.randn(6, 5, 3, generator=g), torch.randn(6, 5, generator=g)
    bins = {"counts": [2, 3, 1], "range": [4, 2, 3],
            "tensors": [torch.randn(3, generator=g), torch.tensor([-1.0, 0.0, 1.0]),
                        torch.randn(5, generator=g)]}[given]
    kw = {"range": [-1.0, 1.0, 0.0, 2.0, -0.5, 0.5]} if given == "range" else {}
    for weight, density in ((None, False), (w, True)):
        _hist_same(lambda: torch.histogramdd(x, bins, weight=weight, density=density, **kw))


# -- _segment_reduce -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean", "prod"])
@pytest.mark.parametrize("initial", [None, 2.0])
@pytest.mark.parametrize("given", ["lengths", "offsets"])
def test_segment_reduce_is_torchs_with_ties_zeros_nans_and_empty_segments(reduce, initial, given):
    """Ties at the maximum (torch splits the gradient only where it is > 0), zeros and a NaN in
    a product, empty segments (mean: NaN without an initial value), along axis 1."""
    x = torch.tensor([[3.0, 3.0, -1.0, 0.0, 2.0, float("nan"), 4.0, 0.0],
                      [1.0, -2.0, 1.0, 1.0, 0.5, 0.0, -3.0, 2.0]])
    lengths = torch.tensor([[2, 0, 3, 1, 2], [3, 2, 0, 0, 3]])
    kw = {"lengths": lengths} if given == "lengths" else \
        {"offsets": torch.cat([torch.zeros(2, 1, dtype=torch.long), lengths.cumsum(1)], 1)}
    call = lambda x: torch.segment_reduce(x, reduce, axis=1, initial=initial, **kw)  # noqa: E731
    for g in (torch.ones(2, 5), torch.tensor([[1.0, -2.0, 0.5, 3.0, -1.0], [2.0, 1.0, -1.0, 1.0, 0.25]])):
        runs = []
        for on in (True, False):
            xx = x.clone().requires_grad_()
            with repops.deterministic() if on else contextlib.nullcontext():
                out = call(xx)
                (gx,) = torch.autograd.grad(out, xx, g)
            runs.append((out.detach(), gx))
        _close(*runs)


def test_segment_reduce_out_of_range_segments_are_refused():
    with pytest.raises(repops.DomainFault, match="in order within"), repops.deterministic():
        torch.segment_reduce(torch.ones(4), "sum", lengths=torch.tensor([3, 3]), unsafe=True)


def test_segment_reduce_takes_int32_or_int64_lengths_as_torch_does():
    """int32 lengths by the to_i64.i32 kernel: the bits of int64 ones; other integer dtypes are
    torch's error too (it has no kernel for them)."""
    x, lengths = torch.randn(2, 7, generator=_g(12)), torch.tensor([[2, 0, 5], [3, 3, 1]])
    with repops.deterministic():
        want = torch.segment_reduce(x, "mean", axis=1, lengths=lengths)
        got = torch.segment_reduce(x, "mean", axis=1, lengths=lengths.int())
        offs = torch.segment_reduce(x, "mean", axis=1, offsets=torch.tensor([[0, 2, 2, 7], [0, 3, 6, 7]]).int())
        with pytest.raises(RuntimeError, match="int64 or int32"):
            torch.segment_reduce(x, "mean", axis=1, lengths=lengths.short())
    assert torch.equal(bits(got), bits(want)) and torch.equal(bits(offs), bits(want))
    with pytest.raises(RuntimeError, match="not implemented for 'Short'"):
        torch.segment_reduce(x, "mean", axis=1, lengths=lengths.short())


class _Warp(torch.nn.Module):
    """A spatial transformer's core: learned offsets added to a fixed grid, sampled bilinearly
    with border padding, then a masked_scatter of a learned row into the features."""
    def __init__(self):
        super().__init__()
        self.conv, self.shift = torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.Linear(2, 2)
        self.head = torch.nn.Linear(3 * 4 * 5, 2)

    def forward(self, x, grid, target):
        g = grid + 0.1 * torch.tanh(self.shift(grid))
        h = F.grid_sample(torch.relu(self.conv(x)), g, padding_mode="border", align_corners=False)
        h = h.masked_scatter(h > 0.5, self.head.weight[0].reshape(h.shape[1:]).expand_as(h))
        return ((self.head(h.flatten(1)) - target) ** 2).mean()


def test_a_grid_sampling_job_is_its_committed_graph_and_every_node_settles_on_chain(tmp_path):
    from offchain.dispute.context import Context
    from offchain.protocol.dataset import write_program_job
    from offchain.protocol.jobfile import load
    from offchain.trainer import Trainer
    torch.manual_seed(0)
    g = _g(12)
    data = {"x": torch.randn(4, 2, 6, 7, generator=g), "grid": torch.rand(4, 4, 5, 2, generator=g) * 2.4 - 1.2,
            "target": torch.randn(4, 2, generator=g)}
    job = load(write_program_job(tmp_path / "warp", _Warp(), data, list(data), steps=2, batch_size=2,
                                 optimizer={"name": "sgd", "lr": 0.05}))
    ctx = Context(job)
    traced = Trainer(job, tmp_path / "t", "t").step_trace(0)
    assert [n.structure() for n in traced.nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == [], ctx.kernel_graph.unsettled
