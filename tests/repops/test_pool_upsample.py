"""Upsampling (+ backward), adaptive average and max pooling of any sizes, max pooling with its
indices (+ the backward that takes them) and replication padding's backward
(repops/reference/resample.py, pooling.py) against torch natively: values and gradients to rounding,
indices bit for bit (ties, signed zeros, NaNs), the spec's summation order, and the same bits
on 1 and 2 threads; on empty batches, unbatched inputs and sizes that do not divide."""
import contextlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import repops
from repops.errors import IndexFault, UnsupportedOpError
from repops.models.quick_train import num_threads


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


CASES = {
    # nearest / nearest-exact: sizes that do not divide, scale factors, downsampling, 1-3 d
    "nearest1d_scale": (lambda x: F.interpolate(x, scale_factor=1.7), (2, 3, 5)),
    "nearest2d_size": (lambda x: F.interpolate(x, size=(9, 4)), (2, 3, 5, 7)),
    "nearest3d_down": (lambda x: F.interpolate(x, size=(2, 5, 3)), (1, 2, 3, 4, 7)),
    "nearest_exact2d": (lambda x: F.interpolate(x, scale_factor=(2.5, 0.6), mode="nearest-exact"), (2, 2, 4, 6)),
    "nearest_empty_batch": (lambda x: F.interpolate(x, size=(5, 3)), (0, 3, 4, 2)),
    # linear, bilinear, trilinear, both corner rules
    "linear1d": (lambda x: F.interpolate(x, scale_factor=2.5, mode="linear"), (2, 3, 5)),
    "bilinear_align": (lambda x: F.interpolate(x, size=(9, 14), mode="bilinear", align_corners=True), (2, 3, 5, 7)),
    "bilinear_down": (lambda x: F.interpolate(x, size=(3, 4), mode="bilinear"), (2, 3, 5, 7)),
    "trilinear": (lambda x: F.interpolate(x, size=(3, 6, 4), mode="trilinear"), (1, 2, 2, 5, 7)),
    "bicubic": (lambda x: F.interpolate(x, size=(9, 4), mode="bicubic"), (2, 3, 5, 7)),
    "bicubic_align_scale": (lambda x: F.interpolate(x, scale_factor=1.7, mode="bicubic", align_corners=True),
                            (2, 2, 4, 5)),
    "bilinear_antialias_down": (lambda x: F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True),
                                (2, 3, 10, 20)),
    "bilinear_antialias_same_h_align": (lambda x: F.interpolate(x, size=(5, 9), mode="bilinear", antialias=True,
                                                                align_corners=True), (2, 2, 5, 7)),
    "upsample_bilinear_empty": (lambda x: F.interpolate(x, size=(4, 4), mode="bilinear"), (0, 2, 3, 3)),
    # adaptive average pooling: irregular windows, more outputs than inputs, unbatched, empty batch
    "adaptive_avg1d_unbatched": (lambda x: F.adaptive_avg_pool1d(x, 5), (8, 8)),
    "adaptive_avg2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 5)), (2, 3, 7, 8)),
    "adaptive_avg2d_up": (lambda x: F.adaptive_avg_pool2d(x, (8, 9)), (2, 3, 5, 7)),
    "adaptive_avg3d_none": (lambda x: F.adaptive_avg_pool3d(x, (None, 3, 2)), (2, 3, 4, 5, 7)),
    "adaptive_avg_empty": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), (0, 3, 5, 5)),
    "area": (lambda x: F.interpolate(x, size=(3, 4), mode="area"), (2, 2, 7, 5)),
    # adaptive max pooling with indices
    "adaptive_max1d": (lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), (2, 3, 7)),
    "adaptive_max2d_unbatched": (lambda x: F.adaptive_max_pool2d(x, (3, 5), return_indices=True), (3, 7, 8)),
    "adaptive_max3d": (lambda x: F.adaptive_max_pool3d(x, (2, 3, 5), return_indices=True), (1, 2, 3, 5, 7)),
    "adaptive_max_up": (lambda x: F.adaptive_max_pool2d(x, (7, 6), return_indices=True), (2, 2, 4, 5)),
    # max pooling with indices: padding, dilation, ceil_mode, unbatched, empty batch
    "max_pool1d_idx": (lambda x: F.max_pool1d(x, 3, 1, 1, dilation=2, return_indices=True), (2, 3, 9)),
    "max_pool2d_idx": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (2, 3, 7, 8)),
    "max_pool2d_ceil_unbatched": (lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True, return_indices=True), (3, 5, 7)),
    "max_pool3d_idx": (lambda x: F.max_pool3d(x, 2, (1, 2, 2), return_indices=True), (1, 2, 3, 4, 5)),
    "max_pool_idx_empty": (lambda x: F.max_pool2d(x, 2, return_indices=True), (0, 3, 4, 4)),
    "max_pool_module": (lambda x: torch.nn.MaxPool2d(3, 2, 1, return_indices=True)(x), (2, 2, 6, 5)),
    # replication padding (negative amounts crop)
    "replicate1d": (lambda x: F.pad(x, (4, 1), mode="replicate"), (2, 3)),
    "replicate2d_negative": (lambda x: F.pad(x, (-2, 3, 1, -1), mode="replicate"), (2, 3, 5, 7)),
    "replicate3d": (lambda x: F.pad(x, (1, 2, 0, 3, 2, 1), mode="replicate"), (1, 2, 3, 4, 5)),
}


def _run(fn, x, repops_on: bool):
    x = x.clone().requires_grad_()
    with repops.deterministic() if repops_on else contextlib.nullcontext():
        out = fn(x)
        outs = out if isinstance(out, tuple) else (out,)
        floats = [o for o in outs if o.is_floating_point()]
        # a cotangent that is not all ones (integer ops, then one to_f32): gradients weigh each output
        total = sum((o * (torch.arange(o.numel()) % 7 - 3).float().reshape(o.shape)).sum() for o in floats)
        (grad,) = torch.autograd.grad(total, x) if total.requires_grad else (torch.zeros_like(x),)
    return [o.detach() for o in outs], grad


@pytest.mark.parametrize("name", sorted(CASES))
def test_close_to_torch_with_torchs_indices(name):
    fn, shape = CASES[name]
    x = _x(*shape)
    (mine, gm), (theirs, gt) = _run(fn, x, True), _run(fn, x, False)
    for a, b in zip(mine, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        if a.is_floating_point():
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(a, b)  # int64 indices: bit for bit
    torch.testing.assert_close(gm, gt, rtol=1e-5, atol=1e-6)


_BIG = {  # large enough that the compiled kernels split work across threads
    "nearest": (lambda x: F.interpolate(x, scale_factor=1.5), (4, 8, 24, 24)),
    "bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), (4, 8, 24, 24)),
    "adaptive_avg": (lambda x: F.adaptive_avg_pool2d(x, (7, 5)), (4, 8, 24, 24)),
    "max_pool_idx": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (4, 8, 24, 24)),
}


@pytest.mark.parametrize("name", sorted(_BIG))
def test_one_and_two_threads_give_the_same_bits(name):
    fn, shape = _BIG[name]
    x = _x(*shape)
    runs = []
    for n in (1, 2):
        with num_threads(n):
            runs.append(_run(fn, x, True))
    (o1, g1), (o2, g2) = runs
    for a, b in zip(o1 + [g1], o2 + [g2]):
        assert torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


_TIES = torch.tensor([0.0, -0.0, 1.0, 1.0, float("nan"), float("-inf"), 2.0, float("nan")])


@pytest.mark.parametrize("call", [
    lambda x: F.max_pool2d(x, 2, 1, return_indices=True),
    lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
    lambda x: F.max_pool1d(x.flatten(2), 4, 2, 2, return_indices=True),
    lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True),
    lambda x: F.adaptive_max_pool1d(x.flatten(2), 5, return_indices=True),
])
@pytest.mark.parametrize("seed", range(4))
def test_ties_signed_zeros_and_nans_give_torchs_indices(call, seed):
    """torch's loop: ties keep the first position (-0 and +0 tie), a window with NaNs its last
    NaN, a window of -inf its first position inside the input; its gradient goes there."""
    g = torch.Generator().manual_seed(seed)
    x = _TIES[torch.randint(0, len(_TIES), (2, 2, 5, 4), generator=g)]
    (mine, gm), (theirs, gt) = _run(call, x, True), _run(call, x, False)
    assert torch.equal(mine[1], theirs[1])
    torch.testing.assert_close(mine[0], theirs[0], equal_nan=True)
    torch.testing.assert_close(gm, gt, equal_nan=True)


@pytest.mark.parametrize("seed", range(4))
def test_max_pooling_without_indices_sends_the_gradient_where_torch_does(seed):
    """repops.max_pool's backward (no indices asked for) follows the same rule: a window with
    several NaNs gives its gradient to the last NaN, a window of -inf to its first position
    inside the input (the value rule it replaced gave the first NaN, and lost the gradient of
    a -inf window to the padding)."""
    g = torch.Generator().manual_seed(seed)
    x = _TIES[torch.randint(0, len(_TIES), (2, 2, 5, 4), generator=g)]
    call = lambda x: F.max_pool2d(x, 3, 1, 1)  # noqa: E731
    (mine, gm), (theirs, gt) = _run(call, x, True), _run(call, x, False)
    torch.testing.assert_close(mine[0], theirs[0], equal_nan=True)
    torch.testing.assert_close(gm, gt, equal_nan=True)


def test_each_input_sums_its_gradients_in_output_order_from_plus_zero():
    """The spec's order: input 0 of a nearest upsampling 2 -> 5 receives outputs 0, 1, 2 and
    sums them left to right from +0 (binary32): ((0 + 1e8) + 1) - 1e8 = 0, where any other
    association of these three gives 1 or 4; torch's CPU loop gives the same bits."""
    x = torch.zeros(1, 1, 2, requires_grad=True)
    g = torch.tensor([[[1e8, 1.0, -1e8, 3.0, -0.0]]])
    with repops.deterministic():
        (mine,) = torch.autograd.grad(F.interpolate(x, size=5), x, g)
    (theirs,) = torch.autograd.grad(F.interpolate(x, size=5), x, g)
    acc = [np.float32(0.0), np.float32(0.0)]
    for o, v in enumerate(g.flatten().numpy()):
        acc[int(np.float32(o) * np.float32(2 / 5))] += v
    assert mine.flatten().tolist() == [float(a) for a in acc] == theirs.flatten().tolist() == [0.0, 3.0]
    assert not torch.signbit(mine).any()  # +0 + -0 = +0, as torch's zeroed gradient


def test_adaptive_average_of_a_multiple_is_average_pooling_bit_for_bit():
    """Sizes that divide: the same kernels (window views) and bits as avg_pool with kernel =
    stride = in / out, the definition before windows of any size."""
    from repops.reference import nn as N
    from repops.reference import pooling as R
    x = _x(2, 3, 8, 6).numpy()
    a = R.adaptive_avg_pool(x, [4, 3])
    b = N.avg_pool(x, [2, 2], [2, 2], [0, 0], False, True, None)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_a_window_wholly_in_the_padding_is_refused_with_indices_and_has_no_gradient_without():
    """kernel 2, dilation 2, padding 1 on a height of 1: the window reads rows -1 and 1, both
    padding. torch returns indices outside the input there (4, 5, 6 for a 1 x 4 input) and its
    backward writes out of bounds; RepOps refuses the indices, and without indices the value
    is -inf and the gradient goes nowhere."""
    x = _x(1, 2, 1, 4).requires_grad_()
    with pytest.raises(UnsupportedOpError, match="lies entirely in the padding"):
        with repops.deterministic():
            F.max_pool2d(x, 2, 1, 1, 2, return_indices=True)
    with repops.deterministic():
        y = F.max_pool2d(x, 2, 1, 1, 2)
        (g,) = torch.autograd.grad(y.sum(), x)
    assert torch.isneginf(y[..., 0, :]).all() and torch.equal(g, torch.zeros_like(x))


@pytest.mark.parametrize("call", [
    lambda x: F.interpolate(x, scale_factor=2.03, recompute_scale_factor=False),           # 6 -> 12 = 2 x 6
    lambda x: F.interpolate(x, scale_factor=1.1, recompute_scale_factor=False, mode="bilinear"),  # 6 -> 6
    lambda x: F.interpolate(x, scale_factor=1.1, recompute_scale_factor=False, mode="bicubic"),
    lambda x: F.interpolate(x[0], scale_factor=1.1, recompute_scale_factor=False, mode="linear"),
])
def test_scale_factors_where_torchs_own_kernels_disagree_are_refused(call):
    """A scale factor that gives the input's size (nearest: or twice it) while 1/scale is not
    in/out: torch's 2-d nearest and linear forwards take the sizes, its 1-d nearest and bicubic
    forwards the scale, and some backwards copy the gradient (found by a differential fuzz:
    native forward and backward disagree with each other's adjoint). Refused, never one of them."""
    x = _x(1, 2, 6, 6).requires_grad_()
    with pytest.raises(UnsupportedOpError, match="torch's own kernels disagree"):
        with repops.deterministic():
            call(x).sum().backward()


def test_antialiased_resize_to_a_width_of_one_is_refused():
    """torch's CPU kernel repeats the first row there ((9, 1) -> (4, 1) gives one value four times,
    while the same column of (9, 2) -> (4, 2) is resampled)."""
    x = _x(1, 1, 9, 2)
    with pytest.raises(UnsupportedOpError, match="width of 1"):
        with repops.deterministic():
            F.interpolate(x, size=(4, 1), mode="bilinear", antialias=True)


def test_an_index_outside_its_window_is_a_fault():
    """torch would write that gradient wherever the index points; RepOps' backward reads each
    window, so it refuses (rule `index`) rather than drop it."""
    x = _x(1, 1, 4, 4)
    _, idx = F.max_pool2d(x, 2, return_indices=True)
    idx[0, 0, 0, 0] = 15  # a position of another window
    with pytest.raises(IndexFault, match="not a position of its pooling window"):
        with repops.deterministic():
            torch.ops.aten.max_pool2d_with_indices_backward(torch.ones(1, 1, 2, 2), x, [2, 2], [2, 2], [0, 0],
                                                           [1, 1], False, idx)


class _TinyUNet(torch.nn.Module):
    """Replication padding, down by max pooling, up by nearest and bilinear upsampling with a
    skip, an irregular adaptive average pool to a head: the U-Net ops of issue #39."""

    def __init__(self):
        super().__init__()
        self.down, self.mid = torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.Conv2d(4, 4, 3, padding=1)
        self.up, self.head = torch.nn.Conv2d(8, 3, 3, padding=1), torch.nn.Linear(3 * 3 * 3, 2)

    def forward(self, x, target):
        h = torch.relu(self.down(F.pad(x, (1, 1, 0, 0), mode="replicate")[..., 1:-1]))
        m = torch.relu(self.mid(F.max_pool2d(h, 2)))
        u = self.up(torch.cat([h, F.interpolate(m, scale_factor=2)], 1))
        u = u + F.interpolate(F.adaptive_avg_pool2d(u, (3, 4)), size=u.shape[-2:], mode="bilinear")
        y = self.head(F.adaptive_avg_pool2d(u, 3).flatten(1))
        return ((y - target) ** 2).mean()


def test_a_unet_job_is_its_committed_graph_and_every_node_settles_on_chain(tmp_path):
    from offchain.dispute.context import Context
    from offchain.protocol.dataset import write_program_job
    from offchain.protocol.jobfile import load
    from offchain.trainer import Trainer
    torch.manual_seed(0)
    data = {"x": _x(4, 2, 8, 10), "target": _x(4, 2, seed=1)}
    job = load(write_program_job(tmp_path / "unet", _TinyUNet(), data, list(data), steps=2, batch_size=2,
                                 optimizer={"name": "sgd", "lr": 0.05}))
    ctx = Context(job)
    traced = Trainer(job, tmp_path / "t", "t").step_trace(0)
    assert [n.structure() for n in traced.nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []  # (torch's decompositions left arange nodes: MAT)


@pytest.mark.parametrize("call", [
    lambda x: F.interpolate(x, size=(7, 9), mode="bilinear"),
    lambda x: F.interpolate(x, scale_factor=1.6, mode="bilinear", align_corners=True),
    lambda x: F.interpolate(x[0], size=11, mode="linear"),
    lambda x: F.interpolate(x[None], size=(2, 7, 3), mode="trilinear"),
    lambda x: F.interpolate(x, size=(7, 3)) + F.interpolate(x, scale_factor=1.5, mode="nearest-exact")[..., :7, :3],
    lambda x: F.pad(x, (2, -1, 3, 1), mode="replicate"),
])
def test_forwards_give_the_bits_of_torchs_decomposition_on_repops(call, monkeypatch):
    """Linear upsampling, nearest and replication padding are torch's decompositions
    (torch._decomp, run on RepOps' ops before) without their arange nodes: the same bits."""
    from repops.aten import REGISTRY
    x = _x(2, 3, 5, 4)
    with repops.deterministic():
        mine = call(x)
    for name in ("upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d", "upsample_nearest2d",
                 "_upsample_nearest_exact2d", "replication_pad2d"):
        monkeypatch.delitem(REGISTRY, getattr(torch.ops.aten, name).default)
    with repops.deterministic():
        theirs = call(x)
    assert torch.equal(mine.view(torch.int32), theirs.view(torch.int32))
