"""Every primitive kernel the RepOps reference executes is exactly one soft-float opcode per
element: re-executing recorded steps with offchain.softfloat (what the referee does at the
dispute's last level) gives the recorded bits."""
import numpy as np
import pytest

from offchain.softfloat import float32 as sf
from offchain.softfloat.check import to_words
from repops.reference import math as M
from repops.reference import prims as P
from repops.reference.linalg import matmul


def check_tape(rec, per_step=6, rng=None):
    rng = rng or np.random.default_rng(0)
    checked = 0
    for name, args, out in rec:
        out = np.asarray(out)
        shape = out.shape
        ins = [np.broadcast_to(to_words(a), shape) for a in args]
        outw = to_words(out).reshape(shape)
        flat = [x.reshape(-1) for x in ins]
        for j in rng.choice(outw.size, min(per_step, outw.size), replace=False):
            operands = [int(f[j]) for f in flat] + [0] * (3 - len(flat))
            got = sf.apply(sf.PRIMITIVES[name][0], *operands)
            assert got == int(outw.reshape(-1)[j]), (name, [hex(o) for o in operands], hex(got))
            checked += 1
    return checked


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 88.7, -104.5, 3.4e38], np.float32)


@pytest.mark.parametrize("fn", [M.exp, M.log, M.erf, M.sigmoid, M.tanh, M.sin, M.cos], ids=lambda f: f.__name__)
def test_transcendental_steps_are_softfloat_primitives(fn):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(50).astype(np.float32) * 20, SPECIALS])
    with P.tape() as rec:
        fn(x)
    assert len(rec) > 5
    assert check_tape(rec, rng=rng) > 5 * len(rec) // 2


def test_matmul_steps_are_fma_opcodes():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 9)).astype(np.float32), rng.standard_normal((9, 3)).astype(np.float32)
    a[0, 0] = np.float32(1e-42)
    with P.tape() as rec:
        matmul(a, b)
    assert [n for n, _, _ in rec] == ["fma"] * 9
    check_tape(rec, per_step=12, rng=rng)
