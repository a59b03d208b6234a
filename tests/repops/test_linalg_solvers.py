"""Dense solvers under RepOps (repops/reference/solvers.py, repops/aten_linalg.py): torch's
result to rounding (forward and gradients, batches, empty and unbatched inputs), LAPACK's
pivots exactly (ties to the lowest row), a failed factorisation refused as the `singular`
fault where torch raises, the same bits on 1 and 2 threads and on the CPU backend and the
reference, and a decomposition whose structure does not depend on the values (the pivots
are integer kernel outputs, rows move by gathers)."""
import numpy as np
import pytest
import torch

import repops
from repops.errors import DomainFault
from repops.models.quick_train import num_threads


def _m(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def _spd(*shape, seed=0):
    a = _m(*shape, seed=seed)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


def _bits(t):
    return t.detach().contiguous().view(torch.int32)


def _leaves(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _run(fn, inputs, threads=None, backend="cpu"):
    """fn(*inputs) and the gradients of the sum of its float outputs, under RepOps (threads) or natively."""
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    ctx = repops.deterministic(backend) if threads else torch.enable_grad()
    with num_threads(threads or torch.get_num_threads()), ctx:
        outs = _leaves(fn(*xs))
        diff = [o for o in outs if o.requires_grad]
        wrt = [x for x in xs if x.requires_grad]
        grads = torch.autograd.grad(sum(o.sum() for o in diff), wrt, allow_unused=True) if diff else []
    return [o.detach() for o in outs], [g if g is None else g.detach() for g in grads]


def _check(fn, *inputs, rtol=1e-4, atol=1e-5):
    want, want_g = _run(fn, inputs)
    one, one_g = _run(fn, inputs, threads=1)
    two, two_g = _run(fn, inputs, threads=2)
    for a, b, c in zip(one + one_g, two + two_g, want + want_g):
        assert (a is None) == (c is None)
        if a is None:
            continue
        assert a.shape == c.shape and a.dtype == c.dtype
        if a.is_floating_point():
            torch.testing.assert_close(a, c, rtol=rtol, atol=atol, equal_nan=True)
            assert torch.equal(_bits(a), _bits(b))
        else:
            assert torch.equal(a, c) and torch.equal(a, b)  # pivots, info: exactly LAPACK's


L = torch.linalg
NAN, INF = float("nan"), float("inf")
CASES = {
    "cholesky": (lambda a: L.cholesky(a), lambda: [_spd(2, 3, 5, 5)]),
    "cholesky_upper": (lambda a: L.cholesky(a, upper=True), lambda: [_spd(4, 4)]),
    "cholesky_upper_reads_the_upper_triangle": (lambda a, n: L.cholesky(a.triu() + n.tril(-1), upper=True),
                                                lambda: [_spd(4, 4), 5 * _m(4, 4, seed=2)]),
    "cholesky_reads_the_lower_triangle": (lambda a, n: L.cholesky_ex(a.tril() + n.triu(1)),
                                          lambda: [_spd(2, 4, 4), 5 * _m(4, 4, seed=2)]),
    "cholesky_ex": (lambda a: L.cholesky_ex(a), lambda: [_spd(3, 4, 4)]),
    "torch.cholesky": (lambda a: torch.cholesky(a), lambda: [_spd(2, 4, 4)]),
    "solve_triangular_lower": (lambda a, b: L.solve_triangular(a.tril() + 4 * torch.eye(5), b, upper=False),
                               lambda: [_m(2, 5, 5), _m(2, 5, 3, seed=1)]),
    "solve_triangular_upper_right_unit": (
        lambda a, b: L.solve_triangular(a, b, upper=True, left=False, unitriangular=True),
        lambda: [_m(4, 4), _m(3, 2, 3, 4, seed=1)]),
    "triangular_solve_transpose": (lambda b, a: torch.triangular_solve(b, a.triu() + 4 * torch.eye(4), transpose=True),
                                   lambda: [_m(4, 2), _m(2, 4, 4, seed=1)]),
    "lu_factor": (lambda a: L.lu_factor(a), lambda: [_m(3, 5, 5)]),
    "lu_factor_ex_wide": (lambda a: L.lu_factor_ex(a), lambda: [_m(2, 3, 5)]),
    "lu_tall": (lambda a: L.lu(a), lambda: [_m(2, 6, 4)]),
    "lu_unpack": (lambda a: torch.lu_unpack(*L.lu_factor(a)), lambda: [_m(5, 5)]),
    "lu_solve": (lambda a, b: L.lu_solve(*L.lu_factor(a), b), lambda: [_m(2, 4, 4), _m(2, 4, 3, seed=1)]),
    "lu_solve_right_adjoint": (lambda a, b: L.lu_solve(*L.lu_factor(a), b, left=False, adjoint=True),
                               lambda: [_m(4, 4), _m(3, 4, seed=1)]),
    "solve": (lambda a, b: L.solve(a, b), lambda: [_m(3, 5, 5), _m(3, 5, 2, seed=1)]),
    "solve_vector": (lambda a, b: L.solve(a, b), lambda: [_m(5, 5), _m(5, seed=1)]),
    "solve_right": (lambda a, b: L.solve(a, b, left=False), lambda: [_m(2, 4, 4), _m(2, 3, 4, seed=1)]),
    "solve_ex_transposed_A": (lambda a, b: L.solve_ex(a.mT, b), lambda: [_m(4, 4), _m(4, 2, seed=1)]),
    "inv": (lambda a: L.inv(a), lambda: [_m(3, 4, 4)]),
    "inv_ex": (lambda a: L.inv_ex(a), lambda: [_m(5, 5)]),
    "matrix_power_negative": (lambda a: L.matrix_power(a, -2), lambda: [_m(2, 3, 3) + 3 * torch.eye(3)]),
    "det": (lambda a: L.det(a), lambda: [_m(4, 5, 5)]),
    "det_transposed": (lambda a: L.det(a.mT), lambda: [_m(2, 4, 4)]),
    "slogdet": (lambda a: L.slogdet(a), lambda: [_m(3, 4, 4)]),
    "logdet": (lambda a: torch.logdet(a), lambda: [_spd(2, 4, 4)]),
    "cholesky_solve": (lambda b, a: torch.cholesky_solve(b, L.cholesky(a)), lambda: [_m(2, 4, 3), _spd(2, 4, 4, seed=1)]),
    "cholesky_solve_upper": (lambda b, a: torch.cholesky_solve(b, L.cholesky(a, upper=True), upper=True),
                             lambda: [_m(4, 2), _spd(4, 4, seed=1)]),
    "cholesky_inverse": (lambda a: torch.cholesky_inverse(L.cholesky(a)), lambda: [_spd(3, 3)]),
    "tensorinv": (lambda a: L.tensorinv(a, ind=2), lambda: [_m(2, 3, 6)]),
    "tensorsolve": (lambda a, b: L.tensorsolve(a, b), lambda: [_m(2, 3, 6), _m(2, 3, seed=1)]),
    "solve_broadcast": (lambda a, b: L.solve(a + 3 * torch.eye(3), b), lambda: [_m(2, 1, 3, 3), _m(4, 3, 2, seed=1)]),
    "lu_solve_broadcast": (lambda a, b: L.lu_solve(*L.lu_factor(a), b), lambda: [_m(2, 3, 3), _m(4, 2, 3, 1, seed=1)]),
    "cholesky_solve_broadcast": (lambda b, a: torch.cholesky_solve(b, L.cholesky(a)), lambda: [_m(3, 2), _spd(2, 3, 3)]),
    "slogdet_strided": (lambda a: L.slogdet(a[..., ::2, ::2]), lambda: [_m(2, 6, 6)]),
    "lu_factor_one_row": (lambda a: L.lu_factor(a), lambda: [_m(1, 4)]),
    "empty_batch_inv": (lambda a: L.inv(a), lambda: [_m(0, 3, 3)]),
    "empty_matrix_slogdet": (lambda a: L.slogdet(a), lambda: [_m(2, 0, 0)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_solvers_are_torchs_forward_and_backward_and_thread_independent(name):
    fn, make = CASES[name]
    _check(fn, *make())


def test_pivot_ties_go_to_the_lowest_row_as_lapack():
    """Columns whose largest |value| appears several times (and zero columns): LAPACK's idamax
    picks the first; so does RepOps, and the pivots and LU are torch's exactly here."""
    a = torch.tensor([[[1.0, 2.0, 3.0], [-1.0, 4.0, 1.0], [1.0, -2.0, 5.0]],
                      [[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, -3.0, 1.0]]])
    want = L.lu_factor_ex(a)
    with repops.deterministic():
        got = L.lu_factor_ex(a)
    assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])
    assert got[2].tolist() == [0, 1]  # the zero column: info 1, as LAPACK
    assert torch.equal(_bits(got[0]), _bits(want[0]))


@pytest.mark.parametrize("rows", [[[1.0, 2, 3], [NAN, 1, 2], [5, 1, 1]], [[NAN, 2, 3], [4, 1, 2], [5, 1, 1]],
                                  [[1.0, 2, 3], [2, NAN, 2], [5, 1, NAN]], [[0.0, 2, 3], [0, NAN, 2], [0, 1, NAN]],
                                  [[INF, 2, 3], [INF, 1, 2], [5, 1, 1]]])
def test_a_nan_is_a_pivot_only_in_the_first_row_as_lapack(rows):
    """idamax's strict greater-than: a NaN below the first row is never the pivot; in the
    first it is (nothing beats it). The old rule (NaN greatest) picked row 2 in the first case."""
    a = torch.tensor(rows)
    want = L.lu_factor_ex(a)
    with repops.deterministic():
        got = L.lu_factor_ex(a)
    assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])
    assert torch.equal(got[0].isnan(), want[0].isnan())


def test_an_integer_matrix_singular_in_exact_arithmetic_is_singular_as_in_torch():
    """det/slogdet factor Aᵀ: l = -2 (1/3), then 2 - l 3 in two roundings is 0 exactly (torch:
    det -0, log|det| -inf; solve: info 3); an fma update kept a 1e-7 residue (log|det| -15.4,
    solve_ex 1.4e8 with info 0). Found by a differential fuzz."""
    a = torch.tensor([[-2.0, 3.0, 0.5], [-2.0, 3.0, 0.5], [0.5, 1.0, 1.0]])
    b = torch.tensor([[-1.0, -2.0, 0.5], [1.0, 3.0, 0.5], [0.0, 3.0, 3.0]])
    want = L.slogdet(a)
    with repops.deterministic():
        got = L.slogdet(a)
    assert torch.equal(_bits(got[0]), _bits(want[0])) and got[1].item() == want[1].item() == -INF
    assert L.solve_ex(b, torch.ones(3, 2))[1].item() == 3
    with pytest.raises(DomainFault), repops.deterministic():
        L.solve_ex(b, torch.ones(3, 2))


def test_small_lu_factors_are_mkls_bits():
    """The multiplier by the reciprocal and the update in two roundings (LAPACK's dscal/dger as
    torch's MKL runs them for small n): the same LU bits as torch here."""
    a = _m(4, 8, 8, seed=3)
    want = L.lu_factor(a)
    with repops.deterministic():
        got = L.lu_factor(a)
    assert torch.equal(_bits(got[0]), _bits(want[0])) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("n", [48, 96])
def test_a_large_lu_is_as_accurate_as_torchs(n):
    """Above n = 16 torch's MKL factors in blocks (other roundings): RepOps' LU is then torch's
    to rounding, max |P L U - A| (in binary64) within 2x native's (docs/NUMERICS.md, Dense solvers)."""
    for seed in range(2):
        a = _m(n, n, seed=seed)

        def residual(LU, piv):
            Pm, Lm, U = torch.lu_unpack(LU, piv)
            return (Pm.double() @ Lm.double() @ U.double() - a.double()).abs().max().item()
        native = residual(*L.lu_factor(a))
        with repops.deterministic():
            got = L.lu_factor(a)
        assert residual(*got) <= 2 * native, (n, seed)


@pytest.mark.parametrize("rows", [[[NAN, 3.0, -2.0], [-1.0, 2.0, 0.5], [-1.0, 0.5, 3.0]],
                                  [[3.0, -1.0, 1.0], [-INF, -1.0, 0.5], [-1.0, 3.0, 3.0]]])
def test_slogdet_sign_at_a_nan_pivot_is_torchs_signed_zero(rows):
    """torch's sgn(NaN) is 0: the sign is ±0, not ±1 (found by a differential fuzz)."""
    a = torch.tensor(rows)
    want = L.slogdet(a)
    with repops.deterministic():
        got = L.slogdet(a)
    assert torch.equal(_bits(got[0]), _bits(want[0])) and got[1].isnan() and want[1].isnan()


def test_cholesky_of_a_non_finite_matrix_is_refused():
    """torch's LAPACK gives info 2 and NaNs for [[inf, .], [3, 1]]; the textbook order gives 3/inf
    = 0 and a finite factor: refused (`singular`) rather than a different answer."""
    a = torch.tensor([[INF, 2.0], [3.0, 1.0]])
    assert L.cholesky_ex(a)[1].item() == 2
    with pytest.raises(DomainFault, match="not positive definite"), repops.deterministic():
        L.cholesky_ex(a)


def test_an_exactly_singular_lu_reports_torchs_info():
    a = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]])
    want = L.lu_factor_ex(a)
    with repops.deterministic():
        got = L.lu_factor_ex(a)
    assert got[2].item() == want[2].item() != 0
    assert torch.equal(got[1], want[1])


@pytest.mark.parametrize("fn", [L.inv, L.inv_ex, lambda a: L.solve(a, torch.ones(3)), lambda a: L.solve_ex(a, torch.ones(3)),
                                lambda a: L.lu_factor_ex(a, check_errors=True)],
                         ids=["inv", "inv_ex", "solve", "solve_ex", "lu_factor_ex_check"])
def test_a_singular_matrix_is_the_singular_fault(fn):
    """torch raises (inv, solve) or returns inf/NaN garbage with info (the _ex forms): RepOps
    raises its fault, naming the matrix of the batch and the step."""
    a = torch.stack([torch.eye(3), torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0]])])
    with pytest.raises(DomainFault, match="matrix 1 of the batch is singular") as e:
        with repops.deterministic():
            fn(a)
    assert e.value.rule == "singular" and e.value.element == 1


def test_a_traced_singular_fault_is_a_fault_claim_the_decomposition_makes():
    """The `singular` check's kernels are in the op's decomposition: OpRun faults at the same
    matrix of the batch (what a fault claim names)."""
    from offchain.dispute.oprun import FAULT_KERNEL, OpRun
    from offchain.protocol.trace import StepRecorder
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    base = torch.stack([torch.eye(3), torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0]])])
    rec = StepRecorder([w], [base], chunk=16)
    with pytest.raises(DomainFault), repops.deterministic("cpu", trace=rec):
        L.inv(base * w[:, None, None]).sum().backward()
    node, inputs = rec.faulted()
    run = OpRun(node.structure(), inputs, 16)
    kernels = run.kernels()
    k, element, rule = run.fault
    assert kernels[k].name == FAULT_KERNEL and (element, rule) == (1, "singular")


@pytest.mark.parametrize("fn", [L.cholesky, L.cholesky_ex, torch.cholesky], ids=["cholesky", "cholesky_ex", "torch.cholesky"])
def test_a_matrix_not_positive_definite_is_the_singular_fault(fn):
    a = torch.stack([torch.eye(3), torch.diag(torch.tensor([1.0, -1.0, 1.0]))])
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(a)
    with pytest.raises(DomainFault, match="matrix 1 of the batch is not positive definite") as e:
        with repops.deterministic():
            fn(a)
    assert e.value.rule == "singular"


@pytest.mark.parametrize("name", ["cholesky", "solve", "lu_unpack", "slogdet", "lu_solve_right_adjoint", "cholesky_solve"])
def test_the_cpu_backend_gives_the_reference_bits(name):
    fn, make = CASES[name]
    inputs = make()
    cpu, cpu_g = _run(fn, inputs, threads=1, backend="cpu")
    ref, ref_g = _run(fn, inputs, threads=1, backend="reference")
    for a, b in zip(cpu + cpu_g, ref + ref_g):
        assert torch.equal(_bits(a) if a.is_floating_point() else a, _bits(b) if b.is_floating_point() else b)


def test_the_emulated_cuda_kernels_give_the_reference_bits():
    """The compositions run on the CUDA kernels' sources (the CPU emulator): the same bits."""
    a, b, s = _m(2, 3, 3), _m(2, 3, 2, seed=1), _spd(3, 3)
    outs = {}
    for backend in ("reference", "cuda-emu"):
        with repops.deterministic(backend):
            outs[backend] = [L.solve(a, b), L.det(a), *L.lu(a), L.cholesky(s), L.inv_ex(a)[1]]
    for x, y in zip(outs["reference"], outs["cuda-emu"]):
        assert torch.equal(_bits(x) if x.is_floating_point() else x, _bits(y) if y.is_floating_point() else y)


def test_lu_without_pivoting_is_refused():
    """torch computes it on CUDA only; RepOps refuses it on every device with its own error."""
    from repops.errors import UnsupportedOpError
    a = _m(3, 3)
    with pytest.raises(UnsupportedOpError, match="pivot=True"), repops.deterministic():
        L.lu_factor_ex(a, pivot=False)


def _kernels(fn, inputs):
    """Each node's kernels' structures (names and operand descriptors, no values), forward
    and backward, as the dispute re-runs them (offchain/dispute/oprun.py)."""
    from offchain.dispute.oprun import OpRun
    from offchain.protocol.trace import StepRecorder
    xs = [x.detach().clone().requires_grad_() for x in inputs]
    rec = StepRecorder(xs, [], chunk=8, keep=True)
    with repops.deterministic(trace=rec):
        sum(o.sum() for o in _leaves(fn(*xs)) if o.is_floating_point()).backward()
    state = [x.detach() for x in xs]

    def value(ref):
        return {0: lambda: rec.outputs[ref.index][ref.slot], 1: lambda: state[ref.index]}[ref.kind]()
    runs = [OpRun(n.structure(), [value(r) for r in n.refs], 8) for n in rec.nodes]
    return [(run.op_name, run.kernels()) for run in runs]


def _structures(fn, inputs):
    return [(op, [k.structure() for k in ks]) for op, ks in _kernels(fn, inputs)]


def test_the_decomposition_does_not_depend_on_the_pivots():
    """Two matrices whose pivots differ at every step give the same kernels and descriptors:
    the graph a referee follows is fixed by the shapes (det: LU of Aᵀ, slogdet, solve, inverse)."""
    a = torch.tensor([[1.0, 2.0, 0.5], [3.0, -1.0, 2.0], [0.25, 4.0, 1.0]])
    b = torch.tensor([[5.0, 2.0, 0.5], [3.0, -1.0, 2.0], [0.25, 4.0, 7.0]])
    assert not torch.equal(L.lu_factor(a)[1], L.lu_factor(b)[1])
    for fn in (L.det, lambda m: L.slogdet(m)[1], lambda m: L.solve(m, torch.ones(3, 2)), L.inv):
        sa, sb = _structures(fn, [a]), _structures(fn, [b])
        assert sa and sa == sb


@pytest.mark.parametrize("name", ["slogdet", "inv", "solve_right", "cholesky_solve_upper", "lu_unpack", "lu_solve",
                                  "solve_triangular_upper_right_unit", "cholesky_inverse"])
def test_solver_kernels_read_no_materialised_float_operand(name):
    """Every float operand of every kernel, forward and backward, is a view, a constant or a
    CAT of the node's inputs and earlier kernels' outputs (no MAT the referee could only take
    on trust)."""
    from offchain.dispute.kernels import operand_code
    from offchain.dispute.oprun import decode_kernel
    fn, make = CASES[name]
    for op, kernels in _kernels(fn, make()):
        for k in kernels:
            kname, descs, _, _ = decode_kernel(k.encode())
            if kname == "result":
                continue
            for i, d in enumerate(descs):
                assert not (d[0] == 2 and (operand_code(kname, i) == 1 or kname == "gather")), (op, kname, i)
