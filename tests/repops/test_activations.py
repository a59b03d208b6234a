"""The activations, losses and powers of repops/reference/activations.py against torch and
float64: the accurate building blocks (expm1, log1p) over sweeps, pow over every pair of
special values (signs of zeros and infinities included), and the losses' reductions."""
import itertools

import numpy as np
import torch
import torch.nn.functional as F

import repops
from repops.reference import activations as A


def _ulps(got, want64):
    """|got - want| in units of the binary32 ulp at want."""
    want = want64.astype(np.float32)
    ulp = np.spacing(np.abs(want)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want64) / ulp


def test_expm1_and_log1p_are_within_two_ulps_over_sweeps():
    """The reason they exist: exp(x) - 1 near 0 and log(1 + u) for tiny u lose every digit."""
    rng = np.random.default_rng(0)
    x = np.concatenate([np.float32(10.0) ** rng.uniform(-30, 1.9, 20000).astype(np.float32) * rng.choice([-1, 1], 20000),
                        np.float32([0.4999999, 0.5, -0.5, 1e-38, -1e-40])]).astype(np.float32)
    e = A.expm1(x)
    assert _ulps(e, np.expm1(x.astype(np.float64))).max() <= 2.0
    u = np.concatenate([np.float32(10.0) ** rng.uniform(-40, 30, 20000), -rng.uniform(0, 1, 5000)]).astype(np.float32)
    ln = A.log1p(u)
    finite = u > -1
    assert _ulps(ln[finite], np.log1p(u[finite].astype(np.float64))).max() <= 2.0
    assert A.log1p(np.float32([-1.0]))[0] == -np.inf and A.log1p(np.float32([np.inf]))[0] == np.inf
    assert np.signbit(A.expm1(np.float32([-0.0]))[0]) and np.isnan(A.expm1(np.float32([np.nan]))[0])


_SPECIALS = [0., -0., 1., -1., 2., -2., 0.5, -0.5, 3., -3., float("inf"), -float("inf"), float("nan"), 1e-30, 7.3, -7.3,
             100., 2.5, -2.5, 1e10, 1e-40]


def test_pow_meets_torch_on_every_pair_of_special_values():
    x = torch.tensor([a for a, _ in itertools.product(_SPECIALS, _SPECIALS)])
    y = torch.tensor([b for _, b in itertools.product(_SPECIALS, _SPECIALS)])
    want = torch.pow(x, y)
    for backend in ("cpu", "reference"):
        with repops.deterministic(backend):
            got = torch.pow(x, y)
        torch.testing.assert_close(got, want, rtol=2.4e-7, atol=0, equal_nan=True)  # (2 ulp)
        nonnan = ~want.isnan()
        assert torch.equal(torch.signbit(got[nonnan]), torch.signbit(want[nonnan]))


def test_pow_is_within_one_and_a_half_ulps_whatever_the_exponent():
    """y log|x| in one float each lost |y log x| 2^-24 of the result (128 ulp on this sweep, and
    pow(FLT_MAX, 1) = inf): in two floats, ~1 ulp over every result binade, subnormal results
    aside (their ulp is fixed), negative bases with integer exponents included."""
    rng = np.random.default_rng(5)
    x = np.float32(10.0) ** rng.uniform(-30, 30, 60000).astype(np.float32)
    t = rng.uniform(-87, 88, 60000)                                  # the result's log
    y = (t / np.log(x.astype(np.float64))).astype(np.float32)
    x = np.concatenate([x, -np.float32(rng.uniform(0.5, 40, 3000)), np.float32([3.4028235e38, 2.0, 1e-45])])
    y = np.concatenate([y, np.float32(rng.integers(-20, 21, 3000)), np.float32([1.0, 127.0, -1.0])])
    got = A.pow(x, y)
    want = np.power(x.astype(np.float64), y.astype(np.float64))
    over = np.abs(want) >= 3.4028235677973366e38 * (1 + 2.0 ** -25)   # rounds to inf
    assert np.isinf(got[over]).all() and over.sum() >= 1
    normal = (np.abs(want) >= 2.0 ** -126) & ~over
    err = _ulps(got[normal], want[normal])
    assert err.max() <= 1.5, f"{err.max():.2f} ulp at x={x[normal][np.argmax(err)]!r}, y={y[normal][np.argmax(err)]!r}"


def test_the_activations_keep_torchs_signs_nans_and_infinities():
    x = torch.tensor([0.0, -0.0, float("nan"), float("inf"), -float("inf"), -2.0, 3.5, 1e-20, -1e-20])
    # (relu6 and hardtanh are clamps: -0 in gives +0 out, the spec's max orders -0 < +0, as relu's)
    fns = [F.elu, F.selu, F.softplus, F.mish, F.hardswish, F.hardsigmoid, F.logsigmoid, torch.sign,
           lambda t: F.leaky_relu(t, 0.1), lambda t: F.celu(t, 0.5)]
    for fn in fns:
        want = fn(x)
        with repops.deterministic():
            got = fn(x)
        torch.testing.assert_close(got, want, rtol=2e-6, atol=0, equal_nan=True)
        assert torch.equal(torch.signbit(got[~want.isnan()]), torch.signbit(want[~want.isnan()])), fn


def test_a_losses_reduction_none_sum_and_mean_are_torchs():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    for loss in (F.mse_loss, F.smooth_l1_loss, F.huber_loss, F.l1_loss):
        for reduction in ("none", "sum", "mean"):
            with repops.deterministic():
                got = loss(x, y, reduction=reduction)
            torch.testing.assert_close(got, loss(x, y, reduction=reduction), rtol=1e-6, atol=1e-7)


def test_piecewise_activations_take_torchs_gradient_at_their_breakpoints():
    """At a breakpoint the gradient is a convention, and torch's is the one to meet: hardswish's
    is +0 at -3 and g at 3 (RepOps had the middle piece's -0.5 g and 1.5 g there: found by an
    edge-value sweep); every other piecewise activation's at its own breakpoints too."""
    x = torch.tensor([-6.0, -3.0, -2.0, -1.5, -1.0, -0.5, 0.0, -0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 6.0, 20.0, -20.0])
    fns = [F.hardswish, F.hardsigmoid, F.relu6, F.hardtanh, lambda t: F.hardtanh(t, -2, 1.5), F.relu,
           lambda t: F.leaky_relu(t, 0.1), F.elu, lambda t: F.celu(t, 0.5), F.selu, lambda t: F.hardshrink(t, 0.5),
           lambda t: F.softshrink(t, 0.5), lambda t: F.threshold(t, 1.0, -3.0), lambda t: t.clamp(-1.0, 2.0),
           torch.abs, F.softplus]
    for fn in fns:
        a = x.clone().requires_grad_()
        fn(a).backward(torch.ones_like(x))
        b = x.clone().requires_grad_()
        with repops.deterministic():
            fn(b).backward(torch.ones_like(x))
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-6, atol=0)
        assert torch.equal(torch.signbit(b.grad), torch.signbit(a.grad)), fn
