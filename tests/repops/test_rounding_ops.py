"""Rounding, remainders, IEEE functions and base-2/base-10 logs (repops/reference/rounding.py,
repops/aten_math.py) against numpy's and torch's bits: the exact ops bit for bit over random
bit patterns (huge quotients, subnormals, +-0, +-inf, NaN), exp2/log2/log10/hypot in ulps over
a sweep of every binary32 range, the aten ops under repops.deterministic() on every backend,
and the NaN whose sign RepOps cannot see refused by a fault."""
import itertools
import warnings

import numpy as np
import pytest
import torch

import repops
from repops.reference import rounding as R

F32 = np.float32
SPECIALS = F32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 2.9e-39, 1.1754944e-38, -1.1754942e-38,
                3.4028235e38, -3.4028235e38, 1.0, -1.0, 0.5, 2.0, -3.0, 7.0, 1.5, -2.5, 0.1, 1e30, -1e-30, 8388607.5])


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _bits(a):
    return np.ascontiguousarray(a, F32).view(np.uint32)


def _pairs(n=60000, seed=0):
    """Random bit patterns (every exponent, NaNs with payloads, subnormals), pairs of nearby
    magnitudes (small quotients), and every pair of special values."""
    rng = np.random.default_rng(seed)
    word = lambda: rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(F32)  # noqa: E731
    x, y = word(), word()
    x2 = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)).astype(F32)
    y2 = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(F32)
    sx, sy = (F32([p[i] for p in itertools.product(SPECIALS, SPECIALS)]) for i in (0, 1))
    return np.concatenate([x, x2, sx]), np.concatenate([y, y2, sy])


def _same(got, want):
    """Bitwise equal, every NaN equal to every NaN (RepOps' NaNs are canonical)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != F32:
        return np.array_equal(got, want)
    nan = np.isnan(got) & np.isnan(want)
    bad = ~nan & (_bits(got) != _bits(want))
    assert not bad.any(), f"{bad.sum()} differ, e.g. {got[bad][:3]} vs {want[bad][:3]}"
    return True


def _torch_remainder(x, y):
    """torch's scalar CPU kernel: m = fmod(x, y); m + y where m != 0 and (y < 0) != (m < 0)."""
    m = np.fmod(x, y)
    return np.where((m != 0) & ((y < 0) != (m < 0)), (m + y).astype(F32), m)


def _torch_div_floor(x, y):
    """c10::div_floor_floating, elementwise in numpy float32."""
    m = np.fmod(x, y)
    q = ((x - m) / y).astype(F32)
    q = np.where((m != 0) & ((y < 0) != (m < 0)), q - F32(1), q).astype(F32)
    f = np.floor(q)
    f = np.where(q - f > F32(0.5), f + F32(1), f).astype(F32)
    f = np.where(q != 0, f, np.copysign(F32(0), x / y)).astype(F32)
    return np.where(y == 0, x / y, f).astype(F32)


def test_fmod_is_exact_over_every_exponent_and_special_value():
    """fmod by reduction steps of 24 quotient bits: numpy's (C's exact) fmod bit for bit,
    quotients up to 2^277 (1e38 mod 1e-45) included."""
    x, y = _pairs()
    with np.errstate(all="ignore"):
        want = np.fmod(x, y)
    assert (np.abs(x.astype(np.float64) / y.astype(np.float64)) > 2.0**200).sum() > 1000  # huge quotients ran
    _same(R.fmod(x, y), want)
    big = F32([3.4028235e38, 3.4028235e38, -1e38, 16777217.0 * 2**100])
    tiny = F32([1e-45, 3e-45, 7e-45, 3.0])
    with np.errstate(all="ignore"):
        _same(R.fmod(big, tiny), np.fmod(big, tiny))


def test_remainder_and_floor_and_trunc_division_are_torchs_scalar_kernel_bit_for_bit():
    x, y = _pairs(seed=1)
    with np.errstate(all="ignore"):
        _same(R.remainder(x, y), _torch_remainder(x, y))
        _same(R.div_floor(x, y), _torch_div_floor(x, y))
        _same(R.div_trunc(x, y), np.trunc(x / y))
    # and torch's own kernels where they are exact (its vectorised fmod divides first: NaN
    # where |x / y| overflows binary32; RepOps' is C's exact fmod there)
    ok = np.abs(x.astype(np.float64) / y.astype(np.float64)) < 2.0**120
    tx, ty = torch.from_numpy(x[ok]), torch.from_numpy(y[ok])
    _same(R.fmod(x[ok], y[ok]), torch.fmod(tx, ty).numpy())
    _same(R.remainder(x[ok], y[ok]), torch.remainder(tx, ty).numpy())
    _same(R.div_floor(x[ok], y[ok]), torch.div(tx, ty, rounding_mode="floor").numpy())


def test_rounding_nextafter_frexp_and_fmax_fmin_are_bit_exact():
    x, y = _pairs(seed=2)
    with np.errstate(all="ignore"):
        _same(R.ceil(x), np.ceil(x))
        _same(R.nextafter(x, y), np.nextafter(x, y))
        m, e = R.frexp(x)
        wm, we = np.frexp(x)
        _same(m, wm)
        assert np.array_equal(e, we) and e.dtype == np.int32
        for decimals in (0, 1, 3, -1, -3, 8, 38, -38, 39, -39, 400, -400):
            _same(R.round_decimals(x, decimals), torch.round(torch.from_numpy(x), decimals=decimals).numpy())
    fin = ~np.isnan(x)
    assert np.array_equal(R.signbit(x[fin]), np.signbit(x[fin]))
    signaling = lambda v: np.isnan(v) & ((_bits(v) & 0x00400000) == 0)  # noqa: E731
    quiet = ~signaling(x) & ~signaling(y)  # glibc's fmax answers NaN to a signaling NaN (RepOps has none: §2)
    tx, ty = torch.from_numpy(x[quiet]), torch.from_numpy(y[quiet])
    _same(R.fmax(x[quiet], y[quiet]), torch.fmax(tx, ty).numpy())  # +-0 order included: fmax(-0, +0) = -0
    _same(R.fmin(x[quiet], y[quiet]), torch.fmin(tx, ty).numpy())


def _ulps(got, want64):
    want = want64.astype(F32)
    return np.abs(got.astype(np.float64) - want64) / np.spacing(np.abs(want)).astype(np.float64)


def _sweep(step=2**13, seed=3):
    """One random binary32 word in each run of `step` (every binade): (name, max ulps) of exp2,
    log2 and log10 against float64."""
    words = np.arange(0, 2**32, step, dtype=np.uint64).astype(np.uint32)
    words += np.random.default_rng(seed).integers(0, step, words.size).astype(np.uint32)
    x = words.view(F32)
    for name, fn, ref in (("exp2", R.exp2, np.exp2), ("log2", R.log2, np.log2), ("log10", R.log10, np.log10)):
        with np.errstate(all="ignore"):
            want = ref(x.astype(np.float64))
            ok = np.isfinite(x) & np.isfinite(want.astype(F32)) & ((x > 0) if name != "exp2" else (x > -150))
            yield name, _ulps(fn(x[ok]), want[ok]).max()


def _hypot_ulps():
    x, y = _pairs(seed=4)
    ok = np.isfinite(x) & np.isfinite(y)
    want = np.hypot(x[ok].astype(np.float64), y[ok].astype(np.float64))
    with np.errstate(all="ignore"):
        fin = np.isfinite(want.astype(F32))
        return _ulps(R.hypot(x[ok], y[ok])[fin], want[fin]).max()


def test_exp2_log2_log10_are_within_their_measured_ulps_over_every_binade():
    """This sweep measures exp2 0.93, log2 1.32, log10 1.35 ulp (docs/NUMERICS.md §8; `python
    tests/repops/test_rounding_ops.py 1024` prints them over 2^22 inputs)."""
    bounds = {"exp2": 1.0, "log2": 1.5, "log10": 1.6}
    for name, worst in _sweep():
        assert worst <= bounds[name], name


def test_exp2_log2_log10_special_values():
    ints = np.arange(-149, 128, dtype=F32)
    _same(R.exp2(ints), np.ldexp(F32(1), np.arange(-149, 128)).astype(F32))  # exact
    _same(R.log2(np.ldexp(F32(1), np.arange(-149, 128)).astype(F32)), ints)
    _same(R.log10(F32([1.0, 10.0, 100.0])), F32([0.0, 1.0, 2.0]))
    s = F32([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1e-45])
    with np.errstate(all="ignore"):
        for fn, ref in ((R.log2, np.log2), (R.log10, np.log10)):
            _same(fn(s), ref(s))
        _same(R.exp2(F32([np.inf, -np.inf, np.nan, 128.0, -150.0, -149.5, 0.0, -0.0])),
              F32([np.inf, 0.0, np.nan, np.inf, 0.0, 1e-45, 1.0, 1.0]))


def test_hypot_is_within_one_ulp_and_keeps_cs_special_values():
    assert _hypot_ulps() <= 0.9  # (measured: 0.86)
    with np.errstate(all="ignore"):
        _same(R.hypot(F32([np.inf, np.nan, -np.inf, np.nan, 0.0, -0.0, 3e38, 1e-45]),
                      F32([np.nan, -np.inf, 1.0, 1.0, -0.0, 0.0, 3e38, 1e-45])),
              F32([np.inf, np.inf, np.inf, np.nan, 0.0, 0.0, np.inf, 1e-45]))


def _aten_calls():
    """(exact?, call): exact ones must give torch's bits (torch's log2/exp2/... are libm's)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, generator=g) * 100
    b = torch.randn(64, generator=g) * 3
    exact = [torch.floor, torch.ceil, torch.trunc, torch.round, torch.frac, torch.signbit, torch.fix,
             lambda t: torch.round(t, decimals=2), lambda t: torch.round(t, decimals=-1), torch.frexp,
             lambda t: torch.fmod(t, b), lambda t: torch.remainder(t, b), lambda t: torch.remainder(5.0, b),
             lambda t: torch.fmod(t, 1.5), lambda t: torch.div(t, b, rounding_mode="floor"),
             lambda t: torch.div(t, b, rounding_mode="trunc"), lambda t: torch.floor_divide(t, b), lambda t: t // 2.5,
             lambda t: torch.fmax(t, b), lambda t: torch.fmin(t, b), lambda t: torch.nextafter(t, b),
             lambda t: torch.copysign(t, b), lambda t: t.clone().floor_(), lambda t: t.clone().fix_(),
             lambda t: t.clone().fmod_(b), lambda t: t.clone().div_(b, rounding_mode="floor"),
             lambda t: t.clone().remainder_(2.0)]
    rounded = [torch.exp2, torch.log2, torch.log10, torch.log1p, torch.expm1, lambda t: torch.hypot(t, b),
               lambda t: torch.logaddexp(t, b), lambda t: torch.logaddexp2(t, b),
               lambda t: torch.special.xlog1py(t, b.abs()), lambda t: t.clone().exp2_(), lambda t: t.clone().hypot_(b)]
    return a, [(True, f) for f in exact] + [(False, f) for f in rounded]


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_the_aten_ops_meet_torch_under_repops_on_every_backend(backend):
    a, calls = _aten_calls()
    for i, (exact, fn) in enumerate(calls):
        want = fn(a)
        with repops.deterministic(backend):
            got = fn(a)
        for g, w in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want))):
            assert g.dtype == w.dtype and g.shape == w.shape, i
            if exact:
                assert torch.equal(g.view(torch.int32) if g.is_floating_point() else g,
                                   w.view(torch.int32) if w.is_floating_point() else w), i
            else:
                torch.testing.assert_close(g, w, rtol=2e-6, atol=0, equal_nan=True)


def test_the_sign_of_a_nan_is_refused_by_a_fault():
    """signbit (and copysign, which reads it) of a NaN is that NaN's bit in torch; RepOps' NaNs
    carry no sign, so a NaN there faults (rule domain) instead of guessing."""
    x = torch.tensor([1.0, -0.0, float("nan")])
    for fn in (torch.signbit, lambda t: torch.copysign(torch.ones(3), t)):
        with pytest.raises(repops.errors.DomainFault, match="element 2 is NaN"):
            with repops.deterministic():
                fn(x)
    with repops.deterministic():
        assert torch.equal(torch.signbit(x[:2]), torch.tensor([False, True]))
    for backend in ("reference", "cuda-emu"):
        with pytest.raises(repops.errors.DomainFault) as info, repops.deterministic(backend):
            torch.signbit(x)
        assert (info.value.rule, info.value.element) == ("domain", 2)


def test_a_traced_steps_nan_sign_fault_is_a_fault_claim_the_decomposition_makes():
    """The fault's kernels are in signbit's decomposition: OpRun faults at the same element."""
    from offchain.dispute.oprun import FAULT_KERNEL, OpRun
    from offchain.protocol.trace import StepRecorder
    w = torch.tensor([1.0, -2.0, 3.0, 4.0], requires_grad=True)
    data = torch.tensor([0.5, -1.0, float("nan"), 2.0])
    rec = StepRecorder([w], [data], chunk=16)
    with pytest.raises(repops.errors.DomainFault), repops.deterministic("cpu", trace=rec):
        torch.copysign(w, data * 2).sum().backward()
    node, inputs = rec.faulted()
    run = OpRun(node.structure(), inputs, 16)
    kernels = run.kernels()
    k, element, rule = run.fault
    assert kernels[k].name == FAULT_KERNEL and (element, rule) == (2, "domain")


def test_sgn_floor_and_fmod_backward_give_torchs_gradients():
    """sgn's backward makes aten._efficientzerotensor: a tensor of +0 under RepOps."""
    for fn in (torch.sgn, torch.floor, torch.round, lambda t: torch.fmod(t, 0.7),
               lambda t: torch.fmod(torch.tensor(0.7), t), lambda t: torch.remainder(t, torch.tensor(0.3))):
        x = torch.randn(5, 3, requires_grad=True)
        want = torch.autograd.grad(fn(x).sum(), x)[0]
        with repops.deterministic():
            (g,) = torch.autograd.grad(fn(x).sum(), x)
        assert torch.equal(g.view(torch.int32), want.view(torch.int32))


@pytest.mark.parametrize("backend", ["cpu", "cuda-emu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_the_compositions_give_the_references_bits_on_every_kernel_table(backend):
    """The compositions are primitives only, so every backend's kernels give the reference's
    bits (special values, subnormals and huge quotients included)."""
    from kernel_samples import backend_table
    from repops.reference import prims as P
    table = backend_table(backend)  # (skips the GPU where there is none)
    x, y = _pairs(n=1500, seed=5)
    xp = np
    if backend == "cuda":
        import cupy as xp
    binary = [R.fmod, R.remainder, R.div_floor, R.nextafter, R.hypot, R.fmax]
    unary = [R.ceil, R.exp2, R.log2, R.log10, lambda v: R.round_decimals(v, -2), R.signbit, lambda v: R.frexp(v)[0],
             lambda v: R.frexp(v)[1]]
    for i, fn in enumerate(binary + unary):
        args = (x, y) if i < len(binary) else (x,)
        with P.implementations({}):
            want = fn(*args)
        with P.implementations(table):
            got = fn(*(xp.asarray(a) for a in args))
        got = got.get() if hasattr(got, "get") and not isinstance(got, np.ndarray) else np.asarray(got)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), np.asarray(want).view(np.uint8)), i


def test_ops_torch_decomposes_into_prims_are_recorded_as_aten_nodes_a_dispute_replays():
    """copysign, frac, logaddexp, xlog1py and soft_margin_loss reach prims.signbit, prims.trunc,
    prims.log1p, ...: each runs as its aten op (the prim's impl_aten), so every node of the
    trace is an aten op that OpRun rebuilds and decomposes into kernels."""
    import torch.nn.functional as F
    from offchain.dispute.oprun import OpRun
    from offchain.protocol.trace import StepRecorder
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 5, generator=g).requires_grad_(), torch.randn(4, 5, generator=g).requires_grad_()
    rec = StepRecorder([a, b], [], chunk=8, keep=True)
    with repops.deterministic(trace=rec):
        out = (torch.copysign(a, b) + torch.frac(a * 3) + torch.logaddexp(a, b) + torch.special.xlog1py(a, b.abs())
               + F.soft_margin_loss(a, b.detach().sign()))
        out.sum().backward()
    state = [a.detach(), b.detach()]

    def value(ref):
        return rec.outputs[ref.index][ref.slot] if ref.kind == 0 else state[ref.index]
    names = set()
    for n in rec.nodes:
        run = OpRun(n.structure(), [value(r) for r in n.refs], 8)
        assert run.kernels()
        names.add(run.op_name)
    assert all(name.startswith("aten.") for name in names)
    assert {"aten.signbit.default", "aten.trunc.default", "aten.log1p.default"} <= names, names


if __name__ == "__main__":  # docs/NUMERICS.md §8's figures: python tests/repops/test_rounding_ops.py 1024
    import sys
    for name, worst in _sweep(int(sys.argv[1]) if len(sys.argv) > 1 else 2**13):
        print(f"{name} {worst:.3f} ulp")
    print(f"hypot {_hypot_ulps():.3f} ulp")
