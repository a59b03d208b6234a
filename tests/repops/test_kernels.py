"""Every kernel of every backend equals the reference function of its name, bit for bit, on
normal, special, subnormal-heavy and signed-zero operands (one sample table:
kernel_samples.SAMPLES, over repops.reference.prims.OVERRIDABLE)."""
import numpy as np
import pytest

import repops.aten  # noqa: F401  (imports every reference module, so OVERRIDABLE is complete)
import repops.integer  # noqa: F401  (its override point, "integer")
from repops.reference import prims as P

from kernel_samples import MUTATES, READS, SAMPLES, backend_table as _table, flavours, fresh

BACKENDS = ["cpu", "cuda-emu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _host(x):
    if x is None or isinstance(x, (bool, int, float)):
        return x
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def _same(got, want, what):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{what} output {i}")
        return
    if want is None:
        assert got is None, what
        return
    g, w = _host(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, w.shape, g.dtype, w.dtype)
    gb, wb = (np.ascontiguousarray(a).view(np.uint8) if a.size else a for a in (g, w))
    bad = np.flatnonzero(gb.reshape(-1) != wb.reshape(-1)) if g.size else []
    assert len(bad) == 0, f"{what}: {len(bad)} bytes differ, first at {bad[0]}: {g.reshape(-1)[bad[0] // g.itemsize]!r} vs {w.reshape(-1)[bad[0] // w.itemsize]!r}"


def test_the_sample_table_covers_every_overridable_function_and_no_backend_invents_one():
    assert set(SAMPLES) == set(P.OVERRIDABLE)
    for b in ("cpu", "cuda-emu"):
        assert set(_table(b)) <= set(P.OVERRIDABLE), set(_table(b)) - set(P.OVERRIDABLE)


@pytest.mark.parametrize("flavour", ["normal", "special", "subnormal", "signed_zero"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_kernel_equals_reference(backend, name, flavour):
    table = _table(backend)
    if name not in table:
        pytest.skip(f"{backend} runs the reference composition for {name}")
    rng = np.random.default_rng(abs(hash((name, flavour))) % 2**32)
    cases = SAMPLES[name](rng, flavours(rng)[flavour])
    for i, args in enumerate(cases):
        ref_args = tuple(fresh(a) if j in MUTATES.get(name, ()) else a for j, a in enumerate(args))
        kern_args = tuple(fresh(a) if j in MUTATES.get(name, ()) else a for j, a in enumerate(args))
        with np.errstate(all="ignore"), P.implementations({}):
            want = P.OVERRIDABLE[name].reference(*ref_args)
        got = table[name](*kern_args)
        read = READS.get(name, lambda out: out)
        _same(read(got), read(want), f"{name} on {backend}, case {i} ({flavour})")
