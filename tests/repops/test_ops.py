"""Every sample op: semantically right (close to native torch, forward and gradients) and
reproducible (bitwise across backends, batch rows, memory layouts and thread counts)."""
import pytest
import torch
import torch.nn.functional as F

import repops
from repops import DTypeError, UnsupportedOpError

from repops_samples import SAMPLES, VARIANTS


def run(fn, inputs, backend="cpu", grad=True):
    # detach (not clone): clone would make a strided input contiguous
    xs = [x.detach().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    with repops.deterministic(backend):
        out = fn(*xs)
        if grad and any(x.requires_grad for x in xs):
            out.float().sum().backward()
    return out.detach(), [x.grad for x in xs if x.requires_grad]


def bits(t):
    return t.contiguous().view(torch.int32)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_definition_is_close_to_native_torch(name):
    """A semantic check of each definition (tolerance, not bits: native kernels differ)."""
    fn, make = SAMPLES[name]
    inputs = make()
    out, grads = run(fn, inputs)
    xs = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    ref = fn(*xs)
    ref.float().sum().backward()
    torch.testing.assert_close(out, ref.detach(), rtol=2e-5, atol=2e-6)
    for g, x in zip(grads, [x for x in xs if x.requires_grad]):
        torch.testing.assert_close(g, x.grad, rtol=5e-5, atol=5e-6)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_backends_agree_bitwise(name):
    fn, make = SAMPLES[name]
    inputs = make()
    o1, g1 = run(fn, inputs, "cpu")
    o2, g2 = run(fn, inputs, "reference")
    assert torch.equal(bits(o1), bits(o2))
    for a, b in zip(g1, g2):
        assert torch.equal(bits(a), bits(b))


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "linear", "gelu", "silu", "exp_log"])
def test_row_of_a_batch_equals_the_row_alone(name):
    fn, make = SAMPLES[name]
    inputs = list(make())
    full, _ = run(fn, inputs, grad=False)
    for i in range(inputs[0].shape[0]):
        one, _ = run(fn, [inputs[0][i:i + 1]] + inputs[1:], grad=False)
        assert torch.equal(bits(one), bits(full[i:i + 1])), f"row {i}"


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "linear", "bmm", "sum_mean"])
def test_memory_layout_never_changes_bits(name):
    fn, make = SAMPLES[name]
    inputs = make()
    contiguous, _ = run(fn, inputs)
    strided = [x.t().contiguous().t() if x.dim() == 2 and x.is_floating_point() else x for x in inputs]
    assert not strided[0].is_contiguous() or inputs[0].dim() != 2
    other, _ = run(fn, strided)
    assert torch.equal(bits(contiguous), bits(other))


def test_torch_thread_setting_never_changes_bits():
    fn, make = SAMPLES["linear"]
    inputs = make()
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a, ga = run(fn, inputs)
        torch.set_num_threads(2)
        b, gb = run(fn, inputs)
    finally:
        torch.set_num_threads(old)
    assert torch.equal(bits(a), bits(b)) and all(torch.equal(bits(x), bits(y)) for x, y in zip(ga, gb))


def test_nan_outputs_are_canonical():
    x = torch.tensor([-1.0, 0.0, float("nan"), float("inf")])
    with repops.deterministic():
        y = torch.sqrt(x) + torch.log(x)
    nan = torch.isnan(y)
    assert nan.sum() >= 2 and (bits(y)[nan] == 0x7FC00000).all()


def test_unsupported_op_names_the_op():
    with pytest.raises(UnsupportedOpError, match=r"aten\.igamma.*float32\[4\].*prims\.igamma"):
        with repops.deterministic():
            torch.igamma(torch.ones(4), torch.ones(4))


def test_pow_with_another_exponent_is_the_general_power():
    """Exponents other than +-1..4, +-0.5 used to be refused: exp(p log|x|) with torch's special cases."""
    x = torch.tensor([0.25, 2.0, 9.0, 0.0, -4.0])
    with repops.deterministic():
        got = x.pow(1.5)
    torch.testing.assert_close(got, x.pow(1.5), rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_add_and_sub_with_alpha_are_torchs_fused_multiply_add_bit_for_bit(backend):
    """torch's CPU kernel computes a + alpha b as fma(b, alpha, a) (rsub: fma(a, -alpha, b)); a
    rounded product first differs in 18-30 % of the bits, and overflowed where the sum is finite."""
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(4099, generator=g), torch.randn(4099, generator=g)
    a[:3], b[:3] = torch.tensor([-3e38, 3e38, 1.0]), torch.tensor([3e38, 3e38, -0.0])
    for alpha in (0.3, -1.7, 2.0):
        ops = [lambda: torch.add(a, b, alpha=alpha), lambda: torch.sub(a, b, alpha=alpha),
               lambda: torch.rsub(a, b, alpha=alpha), lambda: a.clone().add_(b, alpha=alpha)]
        for op in ops:
            with repops.deterministic(backend=backend):
                mine = op()
            assert (mine.view(torch.int32) == op().view(torch.int32)).all(), alpha


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_var_and_std_stay_accurate_when_the_values_spread_over_an_ulp_of_their_mean(backend):
    """The mean's rounding adds n delta^2 to sum((x - mean)^2): with values an ulp or two apart
    that made var 2.6x too large (448 values at 1000, 0-2 ulps apart). Now within 1e-5 of
    float64's, for var, std and var_mean, over rows and whole tensors; ordinary data too."""
    g = torch.Generator().manual_seed(4)
    ulp = 6.103515625e-05                                    # at 1000
    tight = 1000.0 + torch.randint(0, 3, (7, 64), generator=g).float() * ulp
    spread = torch.randn(7, 64, generator=g) * 3 + 5
    for x in (tight, spread):
        for f in (lambda t: t.var(), lambda t: t.var(1, unbiased=False), lambda t: t.std(0),
                  lambda t: torch.var_mean(t, 1)[0]):
            with repops.deterministic(backend=backend):
                got = f(x)
            want = f(x.double())
            assert ((got.double() - want).abs() <= 1e-5 * want.abs()).all(), (got, want)


def test_complex_operands_are_refused_never_read_as_their_real_part():
    """A complex operand (a tensor, a 0-dim one, a Python complex) used to enter the float32
    primitives as its real part: torch.where(m, 2j, x) gave [0, 2, 0], fc.abs() |Re fc|, sum(fc)
    Re sum (found by OpInfo's reference inputs). Each is a DTypeError now; polar (RepOps' cos and
    sin, packed) and .to(complex64) (exact) still run."""
    x, m = torch.tensor([0.5, 2.0, 3.0]), torch.tensor([True, False, True])
    with repops.deterministic():
        fc = torch.polar(x, torch.tensor([0.5, 1.0, 2.0]))
        assert fc.dtype == torch.complex64 and x.to(torch.complex64).dtype == torch.complex64
    ops = [lambda: torch.where(m, 2j, x), lambda: torch.where(m, x, torch.tensor(1 + 2j)), lambda: x * 2j,
           lambda: x * fc, lambda: fc.abs(), lambda: fc.sum(), lambda: fc.exp(), lambda: fc @ fc,
           lambda: torch.addcmul(x, x, fc.to(torch.complex128))]
    for op in ops:
        with pytest.raises(DTypeError, match="float32 only"):
            with repops.deterministic():
                op()


def test_var_whose_squares_overflow_is_inf_not_nan():
    """(the correction c (c / n) of an overflowed sum(d^2) was inf - inf)"""
    x = torch.tensor([[3e38, 1.0, 2.0], [1.0, 2.0, -3e38], [1.0, 2.0, 4.0]])
    with repops.deterministic():
        got = x.var(1)
    assert got[:2].isinf().all() and abs(float(got[2]) - 7 / 3) < 3e-7


def test_p0_distances_propagate_nan_as_torchs():
    """cdist/pdist with p = 0 count nonzero differences as torch's min(ceil|d|, 1): NaN in, NaN
    out (vector_norm's ord 0 counts a NaN as nonzero, torch's x != 0, and stays so)."""
    a, b = torch.tensor([[float("nan"), 1.0], [1.0, 2.0]]), torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    for f in (lambda: torch.cdist(a, b, p=0), lambda: F.pdist(torch.cat([a, b]), p=0),
              lambda: torch.linalg.vector_norm(a, ord=0, dim=1)):
        with repops.deterministic():
            got = f()
        want = f()
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_non_binary32_inputs_are_a_clear_error(dtype):
    with pytest.raises(DTypeError, match=f"float32 only; got a {dtype} .*autocast"):
        with repops.deterministic():
            torch.ones(3, dtype=dtype) * torch.ones(3, dtype=dtype)


def test_unknown_backend():
    from repops.errors import BackendError
    with pytest.raises(BackendError, match="unknown RepOps backend 'gpu9'"):
        with repops.deterministic("gpu9"):
            pass


def test_ftz_daz_set_by_the_process_does_not_change_bits():
    from repops.cpu import lib
    x = torch.tensor([1e-39, 3e-39, -2e-40]) * 1.0
    with repops.deterministic():
        want = (x * 0.5 + x).clone()
    L = lib()
    old = L.repops_test_set_ftz_daz(1)
    try:
        assert L.repops_mxcsr_get() & 0x8040 == 0x8040
        with repops.deterministic():
            got = (x * 0.5 + x).clone()
        assert L.repops_mxcsr_get() & 0x8040 == 0x8040, "the caller's MXCSR must be restored"
    finally:
        L.repops_mxcsr_set(old)
    assert (want != 0).all(), "the case must produce subnormals"
    assert torch.equal(bits(got), bits(want))


def _strided(x):
    if not x.is_floating_point() or x.dim() == 0:
        return x
    big = torch.zeros((x.shape[0] * 2,) + tuple(x.shape[1:]))
    big[::2] = x
    return big[::2]  # same values, non-contiguous


@pytest.mark.parametrize("variant", sorted(VARIANTS) + ["strided"])
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_backends_agree_bitwise_on_specials_and_strided_inputs(name, variant):
    fn, make = SAMPLES[name]
    inputs = [(VARIANTS[variant](x, i) if variant in VARIANTS else _strided(x)) for i, x in enumerate(make())]
    if variant == "strided":
        assert not inputs[0].is_contiguous()
    same_outcome(lambda: run(fn, inputs, "cpu"), lambda: run(fn, inputs, "reference"))


def same_outcome(first, second):
    """Two runs -> (output, grads) give the same bits, or the same fault: a special value the
    spec defines no result for (docs/NUMERICS.md §14) faults at the same element everywhere."""
    try:
        o1, g1 = first()
    except repops.Fault as e:
        with pytest.raises(type(e)) as other:
            second()
        assert (other.value.rule, other.value.element) == (e.rule, e.element)
        return
    o2, g2 = second()
    assert torch.equal(bits(o1), bits(o2))
    assert len(g1) == len(g2) and all(torch.equal(bits(a), bits(b)) for a, b in zip(g1, g2))


SHAPED = {
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: torch.log_softmax(x, 0),
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
    "sum_mean": lambda x: x.sum(0, keepdim=True) * x.mean(),
    "gelu_silu": lambda x: torch.nn.functional.gelu(x) + torch.nn.functional.silu(x),
}


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (13, 1), (3, 17), (31, 5), (2, 3, 11)])
@pytest.mark.parametrize("name", sorted(SHAPED))
def test_backends_agree_bitwise_on_odd_shapes(name, shape):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape) * 100 + shape[-1])) * 3
    o1, g1 = run(SHAPED[name], [x], "cpu")
    o2, g2 = run(SHAPED[name], [x], "reference")
    assert torch.equal(bits(o1), bits(o2)) and torch.equal(bits(g1[0]), bits(g2[0]))


def test_cpu_backend_really_runs_its_compiled_kernels(monkeypatch):
    """Otherwise every cpu-vs-reference test above would compare the reference with itself."""
    from repops import backends
    calls = []
    table = backends.get("cpu")
    monkeypatch.setattr(backends, "_TABLE", {**backends._TABLE, "cpu": lambda: {
        k: (lambda *a, _k=k, _f=f, **kw: calls.append(_k) or _f(*a, **kw)) for k, f in table.items()}})
    from repops.reference import prims as P
    reference_steps = []
    monkeypatch.setattr(P, "record", lambda name, args, out: reference_steps.append(name) or out)
    x = torch.randn(4, 5)
    with repops.deterministic("cpu"):
        torch.softmax(x @ x.T, -1)
        torch.log(x.abs() + 1)
        torch.nn.functional.gelu(x).sum().item()
    assert {"matmul", "softmax", "log", "abs", "add", "gelu"} <= set(calls) <= set(table)
    assert reference_steps == [], "a numpy reference step ran under the compiled backend"


def test_sum_with_another_result_dtype_is_refused():
    with pytest.raises(DTypeError, match="sum with dtype=torch.float64"):
        with repops.deterministic():
            torch.ones(3).sum(dtype=torch.float64)


def test_masked_fill_in_place_equals_out_of_place():
    x = torch.randn(4, 4)
    m = x > 0
    with repops.deterministic():
        a = x.masked_fill(m, float("nan"))
        b = x.clone().masked_fill_(m, float("nan"))
    assert torch.equal(bits(a), bits(b)) and (bits(a)[m] == 0x7FC00000).all()
