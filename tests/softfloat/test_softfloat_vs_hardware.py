"""Python soft-float vs IEEE-754 hardware (numpy float32) and exact rationals (fma)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from offchain.softfloat import float32 as sf
from offchain.softfloat import check as chk

N_RANDOM = {}
N_DEFAULT = 100_000


def _report(name, a, b, c, got, want, bad):
    i = np.flatnonzero(bad)[:5]
    return f"{name}: {bad.sum()} mismatches, e.g. " + ", ".join(
        f"({a[j]:#010x},{b[j]:#010x},{c[j]:#010x}) -> soft {got[j]:#010x} hw {want[j]:#010x}" for j in i)


@pytest.mark.parametrize("name", sorted(sf.PRIMITIVES))
def test_softfloat_matches_hardware(name):
    rng = np.random.default_rng(sorted(sf.PRIMITIVES).index(name))
    n = N_RANDOM.get(name, N_DEFAULT)
    a, b, c = chk.operands(name, n, rng)
    got = chk.softfloat_results(name, a, b, c)
    want = chk.REFERENCE[name](a, b, c)
    bad = chk.mismatches(name, got, want)
    assert not bad.any(), _report(name, a, b, c, got, want, bad)


def test_every_nan_result_is_canonical():
    rng = np.random.default_rng(7)
    for name in ("add", "sub", "mul", "div", "sqrt", "fma", "neg", "abs", "min", "max", "rint", "floor", "ldexp"):
        a, b, c = chk.operands(name, 2000, rng)
        got = chk.softfloat_results(name, a, b, c)
        nan = np.isnan(got.view(np.float32))
        assert nan.any(), f"{name}: the vector set produced no NaN"
        assert (got[nan] == sf.CANONICAL_NAN).all(), f"{name}: non-canonical NaN"


def test_fma_is_one_rounding_not_two():
    # 1+2^-23 squared = 1 + 2^-22 + 2^-46: a separate multiply drops the 2^-46 term, so
    # fma(x, x, -(1+2^-22)) is 2^-46 (fused) but 0 (unfused).
    x = 0x3F800001                # 1 + 2^-23
    c = 0xBF800002                # -(1 + 2^-22)
    assert sf.fma(x, x, c) == 0x28800000  # 2^-46
    assert sf.add(sf.mul(x, x), c) == 0


def test_fma_references_agree_rational_vs_round_to_odd():
    """The two independent fma references (exact rationals; binary64 round-to-odd) agree,
    zero signs included, so neither can hide a soft-float bug the other would show."""
    rng = np.random.default_rng(11)
    a, b, c = chk.operands("fma", 4000, rng)
    odd = chk.REFERENCE["fma"](a, b, c)   # RepOps reference fma
    exact = np.array([chk.fma_exact(x, y, z) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())], np.uint32)
    bad = chk.mismatches("fma", odd, exact)
    assert not bad.any(), [(hex(a[i]), hex(b[i]), hex(c[i]), hex(odd[i]), hex(exact[i])) for i in np.flatnonzero(bad)[:3]]


@settings(max_examples=3000, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_add_and_mul_commute(a, b):
    assert sf.add(a, b) == sf.add(b, a)
    assert sf.mul(a, b) == sf.mul(b, a)


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_sub_self_is_plus_zero_for_finite(a):
    if sf.is_nan(a) or sf.is_inf(a):
        assert sf.sub(a, a) == sf.CANONICAL_NAN
    else:
        assert sf.sub(a, a) == 0


def test_apply_rejects_bad_words_and_opcodes():
    with pytest.raises(ValueError, match="unknown primitive opcode 99"):
        sf.apply(99, 0)
    with pytest.raises(ValueError, match="not a uint32"):
        sf.apply(0, 1 << 32, 0)
    with pytest.raises(ValueError, match="outside the int32 range"):
        sf.from_int32(2**31)
