"""CTC loss under RepOps (aten._ctc_loss / _ctc_loss_backward, both overloads: int lists and
length tensors; repops/reference/ctc.py): torch's CPU result to rounding (loss and the gradient
of log_probs, rtol 1e-5 with atol 1e-5 of the result's scale: torch's float32 libm exp/log are not
RepOps' own), padded [N, S] and concatenated targets, varying lengths, every reduction,
zero_infinity with impossible alignments (inf), a blank that is not 0; the same bits on 1 and 2
threads and on the CPU backend, the numpy reference and the emulated CUDA kernels."""
import contextlib

import pytest
import torch
import torch.nn.functional as F

import repops
from repops.models.quick_train import num_threads


def _bits(t):
    return t.detach().contiguous().view(torch.int32)


def _case(T, N, C, S, il, tl, seed=0, blank=0):
    g = torch.Generator().manual_seed(seed)
    lp = torch.randn(T, N, C, generator=g).mul(2).log_softmax(-1)
    labels = [c for c in range(C) if c != blank]
    tg = torch.tensor(labels)[torch.randint(0, len(labels), (N, S), generator=g)]
    return lp, tg, il, tl


def _run(case, *, on, backend="cpu", flat=False, tensors=False, reduction="mean", zero_infinity=False, blank=0,
         threads=None):
    lp0, tg, il, tl = case
    lp = lp0.clone().requires_grad_()
    targets = torch.cat([tg[b, :n] for b, n in enumerate(tl)]) if flat else tg
    lengths = (torch.tensor(il), torch.tensor(tl)) if tensors else (list(il), list(tl))
    ctx = repops.deterministic(backend) if on else contextlib.nullcontext()
    with num_threads(threads or torch.get_num_threads()), ctx:
        loss = F.ctc_loss(lp, targets, *lengths, blank=blank, reduction=reduction, zero_infinity=zero_infinity)
        w = (torch.arange(loss.numel()) % 3 + 1).float().reshape(loss.shape)  # an upstream gradient that is not 1
        grad, = torch.autograd.grad((loss * w).sum(), lp)
    return loss.detach(), grad


def _close(mine, native):
    for a, b in zip(mine, native):
        assert a.shape == b.shape and a.dtype == b.dtype
        finite = torch.nan_to_num(b, nan=0.0, posinf=0.0, neginf=0.0)
        scale = max(1.0, float(finite.abs().max())) if b.numel() else 1.0
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * scale, equal_nan=True)


# (T, N, C, S, input_lengths, target_lengths)
SHAPES = {
    "full": (20, 2, 6, 5, [20, 20], [5, 5]),
    "varying": (30, 4, 12, 10, [30, 25, 18, 9], [10, 4, 7, 0]),
    "long": (50, 3, 20, 30, [50, 41, 33], [30, 12, 19]),
    "repeats": (16, 2, 3, 8, [16, 12], [8, 6]),          # C = 3: many repeated labels (the skip rule)
    "single": (7, 1, 5, 3, [7], [3]),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("layout", ["padded", "flat", "padded-tensors", "flat-tensors"])
def test_close_to_torch_and_the_same_bits_on_1_and_2_threads(shape, layout):
    case = _case(*SHAPES[shape], seed=len(shape))
    kw = dict(flat=layout.startswith("flat"), tensors=layout.endswith("tensors"))
    one = _run(case, on=True, threads=1, **kw)
    two = _run(case, on=True, threads=2, **kw)
    assert all(torch.equal(_bits(a), _bits(b)) for a, b in zip(one, two))
    _close(one, _run(case, on=False, **kw))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("blank", [0, 3])
def test_reductions_zero_infinity_and_blank_with_an_impossible_alignment(reduction, zero_infinity, blank):
    """Row 1's target is longer than its input, row 2's needs more frames than it has for its
    repeats (both +inf: no alignment), row 3 is empty (target length 0), row 0 is fine."""
    lp, tg, il, tl = _case(12, 4, 7, 6, [12, 4, 5, 3], [6, 5, 3, 0], seed=7, blank=blank)
    tg[2, :3] = 1 if blank != 1 else 2  # 1 1 1: two blanks between, 5 frames needed, 5 given -> finite
    il[2] = 4  # now 4 frames: impossible
    case = (lp, tg, il, tl)
    kw = dict(reduction=reduction, zero_infinity=zero_infinity, blank=blank)
    mine, native = _run(case, on=True, **kw), _run(case, on=False, **kw)
    _close(mine, native)
    if reduction == "none":
        assert bool(torch.isinf(native[0][1:3]).all()) != zero_infinity
        assert bool(torch.isinf(mine[0][1:3]).all()) != zero_infinity
    for flat in (False, True):  # the same bits with the targets concatenated and the lengths as tensors
        other = _run(case, on=True, flat=flat, tensors=True, **kw)
        assert all(torch.equal(_bits(a), _bits(b)) for a, b in zip(mine, other))


@pytest.mark.parametrize("layout", ["padded", "flat-tensors"])
def test_cpu_reference_and_emulated_cuda_give_the_same_bits(layout):
    case = _case(9, 3, 5, 4, [9, 7, 3], [4, 2, 3], seed=3, blank=2)
    kw = dict(flat=layout.startswith("flat"), tensors=layout.endswith("tensors"), blank=2, reduction="sum",
              zero_infinity=True)
    cpu = _run(case, on=True, **kw)
    for backend in ("reference", "cuda-emu"):
        other = _run(case, on=True, backend=backend, **kw)
        assert all(torch.equal(_bits(a), _bits(b)) for a, b in zip(cpu, other)), backend
    _close(cpu, _run(case, on=False, **kw))


def test_unbatched_input_and_an_input_length_of_zero():
    """F.ctc_loss on [T, C] (torch unsqueezes the batch); an input of length 0 has no alignment (+inf)."""
    lp, tg, _, _ = _case(8, 1, 5, 3, [8], [3], seed=5)
    results = []
    for on in (True, False):
        with repops.deterministic() if on else contextlib.nullcontext():
            x = lp[:, 0].clone().requires_grad_()
            loss = F.ctc_loss(x, tg[0], torch.tensor(8), torch.tensor(3), reduction="sum")
            g, = torch.autograd.grad(loss, x)
            empty = F.ctc_loss(lp, tg, [0], [2], reduction="none")
        results.append((loss.detach(), g, empty))
    _close(*results)
    assert torch.isinf(results[0][2]).all()


def test_log_alpha_width_is_torchs_for_int_lists():
    lp, tg, il, tl = _case(10, 2, 5, 6, [10, 8], [4, 2], seed=9)
    with repops.deterministic():
        nll, log_alpha = torch.ops.aten._ctc_loss(lp, tg, il, tl, 0, False)
    native = torch.ops.aten._ctc_loss(lp, tg, il, tl, 0, False)
    assert log_alpha.shape == native[1].shape == (2, 10, 9)
    _close((nll,), (native[0],))
    # where torch defines them (t < input_length, s <= 2·target_length) the alphas are torch's to rounding
    for b in range(2):
        a, w = log_alpha[b, :il[b], :2 * tl[b] + 1], native[1][b, :il[b], :2 * tl[b] + 1]
        torch.testing.assert_close(a, w, rtol=1e-5, atol=1e-5 * max(1.0, float(w[torch.isfinite(w)].abs().max())))


def test_torchs_library_choice_on_cuda_is_answered_no_and_is_no_node():
    """On CUDA tensors torch's ctc_loss asks _use_cudnn_ctc_loss, then _use_miopen_ctc_loss (the
    H200 found both refused: every CTC sample failed there); RepOps answers no, so torch takes the
    path the CPU takes, _ctc_loss, RepOps' own. The question computes nothing and is not asked on
    the CPU: no node in a trace, or a GPU trainer's trace would not be the CPU's. (The questions
    have no CPU kernel: torch alone raises NotImplementedError here.)"""
    from torch.ops import aten
    lp, targets = torch.randn(6, 3, 5).log_softmax(-1), torch.randint(1, 5, (3, 3))
    seen = []
    with repops.deterministic(trace=lambda func, args, kwargs, out: seen.append(func)):
        for ask in (aten._use_cudnn_ctc_loss.default, aten._use_miopen_ctc_loss.default):
            assert ask(lp, targets, [6, 4, 2], [3, 1, 3], 0) is False
    assert seen == []
    with pytest.raises(NotImplementedError):
        aten._use_cudnn_ctc_loss.default(lp, targets, [6, 4, 2], [3, 1, 3], 0)
