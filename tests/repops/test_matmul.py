"""RepOps CPU matmul == the spec's reference, bit for bit, whatever the layout, thread
count, batch size or MXCSR state."""
import re
import subprocess

import numpy as np
import pytest

from repops import cpu
from repops.cpu.build import build
from repops.errors import DTypeError
from repops.reference.linalg import matmul as ref


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def assert_bitwise(got, want):
    assert got.shape == want.shape
    bad = bits(got) != bits(want)
    assert not bad.any(), f"{bad.sum()} of {bad.size} outputs differ, first at {np.argwhere(bad)[0]}"


def rand(rng, *shape, specials=False):
    x = rng.standard_normal(shape).astype(np.float32)
    if specials:
        pool = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45, 3e38, -3e38], np.float32)
        mask = rng.random(shape) < 0.05
        x[mask] = rng.choice(pool, mask.sum())
    return x


# K=600 spans three K blocks; N=2100 spans two N blocks; 1, primes, non-multiples of 6/16.
SHAPES = [(1, 1, 1), (1, 7, 1), (2, 3, 17), (7, 13, 5), (37, 29, 53), (6, 256, 16), (73, 600, 31),
          (97, 1, 101), (5, 257, 2100), (150, 40, 0), (0, 4, 4), (3, 0, 5)]


@pytest.mark.parametrize("M,K,N", SHAPES)
def test_fast_equals_reference(M, K, N):
    rng = np.random.default_rng(M * 10007 + K * 101 + N)
    a, b = rand(rng, M, K), rand(rng, K, N)
    assert_bitwise(cpu.matmul(a, b), ref(a, b))


def test_specials_subnormals_and_nan_canonical():
    rng = np.random.default_rng(1)
    a, b = rand(rng, 41, 70, specials=True), rand(rng, 70, 23, specials=True)
    out = cpu.matmul(a, b)
    assert_bitwise(out, ref(a, b))
    nan = np.isnan(out)
    assert nan.any() and (bits(out)[nan] == 0x7FC00000).all()


def test_zero_sum_is_plus_zero_and_negative_products_keep_order():
    a = np.array([[-0.0, -1e-45]], np.float32)
    b = np.array([[1.0], [0.0]], np.float32)
    assert bits(cpu.matmul(a, b))[0, 0] == 0  # +0 start: fma(-0, 1, +0) = +0


@pytest.mark.parametrize("layout", ["transposed", "strided", "fortran", "broadcast_batch"])
def test_layout_never_changes_bits(layout):
    rng = np.random.default_rng(2)
    a, b = rand(rng, 45, 66), rand(rng, 66, 39)
    want = ref(a, b)
    if layout == "transposed":
        got = cpu.matmul(np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T)
    elif layout == "strided":
        big = np.zeros((90, 132), np.float32)
        big[::2, ::2] = a
        got = cpu.matmul(big[::2, ::2], b)
    elif layout == "fortran":
        got = cpu.matmul(np.asfortranarray(a), np.asfortranarray(b))
    else:
        got = cpu.matmul(np.broadcast_to(a, (3, 45, 66)), b)[2]
    assert_bitwise(got, want)


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_thread_count_never_changes_bits(threads):
    rng = np.random.default_rng(3)
    a, b = rand(rng, 200, 300, specials=True), rand(rng, 300, 90)
    assert_bitwise(cpu.matmul(a, b, threads=threads), cpu.matmul(a, b, threads=1))


def test_row_of_a_batch_equals_the_row_alone():
    rng = np.random.default_rng(4)
    a, b = rand(rng, 7, 513), rand(rng, 513, 40)
    full = cpu.matmul(a, b)
    for i in range(7):
        assert_bitwise(cpu.matmul(a[i:i + 1], b), full[i:i + 1])


def test_batched_matmul_equals_each_matrix():
    rng = np.random.default_rng(5)
    a, b = rand(rng, 2, 3, 9, 17), rand(rng, 3, 17, 11)
    got = cpu.matmul(a, b)
    assert_bitwise(got, ref(a, b))
    assert_bitwise(got[1, 2], cpu.matmul(a[1, 2], b[2]))


def test_ftz_daz_in_the_caller_does_not_change_bits():
    rng = np.random.default_rng(6)
    a = (rand(rng, 30, 40) * np.float32(1e-38)).astype(np.float32)  # subnormal products
    b = rand(rng, 40, 20)
    want = ref(a, b)
    L = cpu.lib()
    old = L.repops_test_set_ftz_daz(1)
    try:
        got = cpu.matmul(a, b, threads=1)
    finally:
        L.repops_test_set_ftz_daz(old & 0x8040)  # restore the caller's flags
    assert (np.abs(want) < np.float32(1.2e-38)).any(), "the case must produce subnormals"
    assert_bitwise(got, want)


def test_non_float32_is_a_clear_error():
    with pytest.raises(DTypeError, match="float32, got float64"):
        cpu.matmul(np.ones((2, 2)), np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="do not chain"):
        cpu.matmul(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))


def _fma_owners(lib) -> set:
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True).stdout
    owners, current = set(), None
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:", line)
        if m:
            current = m.group(1)
        elif re.search(r"\bv?f(n)?m(add|sub)", line):
            owners.add(current)
    return owners


def test_fma_instructions_only_where_the_spec_says_fma():
    """No implicit contraction anywhere: the same sources built with every spec fma turned
    into a rounded multiply and add (REPOPS_FMA_PROBE) contain no fused instruction at all,
    so each one in the real build is one the spec asks for (the matmul tile, the fma
    primitive, the transcendentals' Horner steps)."""
    assert {"kernel_6x16", "map_inner_avx2"} <= _fma_owners(build())  # the spec's fma is used, fused
    assert _fma_owners(build(("-DREPOPS_FMA_PROBE",))) == set()


def test_fma_kernel_equals_reference_fma_including_specials_and_broadcast():
    from repops.reference import prims as P
    rng = np.random.default_rng(9)
    a, b = rand(rng, 1000, 3, specials=True), rand(rng, 1, 3, specials=True)
    c = rand(rng, 1000, 3, specials=True) * np.float32(1e-3)
    with np.errstate(all="ignore"):  # specials overflow here, on purpose
        c[::7] = -a[::7] * b[0]      # exact cancellations: +0
    fma = cpu.table()["fma"]
    assert_bitwise(fma(a, b, c), P.fma.reference(a, b, c))
    big = rand(rng, 300_000)
    assert_bitwise(fma(big, big[::-1], big), P.fma.reference(big, big[::-1], big))  # threaded path


@pytest.mark.parametrize("shape,axis", [((1,), 0), ((7,), 0), ((13, 1), 1), ((3, 257), 1), ((300, 5), 0),
                                        ((2, 3, 129), 2), ((2, 3, 129), 1), ((600, 40), 1), ((4, 0), 1)])
@pytest.mark.parametrize("which", ["add", "max"])
def test_fold_kernel_equals_reference(shape, axis, which):
    from repops.reference import prims as P
    from repops.reference.fold import fold as ref_fold
    prim, init = (P.add, -0.0) if which == "add" else (P.max_, -np.inf)
    rng = np.random.default_rng(sum(shape) + axis)
    x = rand(rng, *shape, specials=True)
    if x.size:
        x.reshape(-1)[::3] = -0.0  # signed zeros decide max(-0, +0) and -0 sums
    assert_bitwise(cpu.fold(prim, x, axis, init), ref_fold.reference(prim, x, axis, init))
    assert_bitwise(cpu.fold(prim, x, axis, init, keepdims=True), ref_fold.reference(prim, x, axis, init, keepdims=True))


def test_fused_exp_equals_reference_sequence():
    from repops.reference import math as M
    rng = np.random.default_rng(10)
    x = np.concatenate([rng.uniform(-110, 95, 200_000).astype(np.float32), rand(rng, 5000, specials=True),
                        np.arange(0, 1 << 32, 1 << 10, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    assert_bitwise(cpu.table()["exp"](x), M.exp.reference(x))


def test_strided_operands_are_read_in_place_with_the_same_bits():
    """Reversed, sliced, transposed and broadcast-batch operands go to the kernel with their
    strides (no copy); the bits are the reference's."""
    from repops.reference.linalg import matmul as ref
    rng = np.random.default_rng(11)
    big = rng.standard_normal((40, 50)).astype(np.float32)
    cases = [(big[::-1, 3:20], big[5:22, ::-2]), (big[2:9, 1:30:2].T, big[:7, 10:23]),
             (big[None, :13, :9], rng.standard_normal((4, 9, 6)).astype(np.float32).transpose(0, 2, 1).transpose(0, 2, 1)),
             (np.broadcast_to(big[:5, :7], (3, 5, 7)), rng.standard_normal((3, 7, 4)).astype(np.float32)[:, :, ::-1])]
    for a, b in cases:
        assert_bitwise(cpu.matmul(a, b), ref.reference(np.ascontiguousarray(a), np.ascontiguousarray(b)))
