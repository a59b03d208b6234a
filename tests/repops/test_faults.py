"""Faults (docs/NUMERICS.md §14): an input the spec defines no result for meets the same fault,
at the same element, on every backend, where torch also refuses it; a decomposition records the
rule's kernels and a fault.bool that faults at that very element, and computes on past it with
the kernel structure of a clean input; integer division never traps, and gives the spec's bits
on every backend."""
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import repops
from offchain.dispute.oprun import FAULT_KERNEL, OpRun
from offchain.protocol.trace import StepRecorder

BACKENDS = ("reference", "cpu", "cuda-emu")
X = torch.linspace(-1, 1, 20).reshape(4, 5)
W = torch.linspace(-2, 2, 12).reshape(4, 3)


def _index_case(fn, good, bad, n, element):
    """fn(x, w, index) faults on `bad` at `element` (the first index outside [0, n)); `good`
    has the same shape and no fault."""
    return fn, good, bad, "index", element


# name -> (fn(x, w, idx), a clean index, a faulting one, the rule, the first bad element)
CASES = {
    "cross_entropy": _index_case(lambda x, w, t: F.cross_entropy(x, t), torch.tensor([1, 4, 2, 0]),
                                 torch.tensor([1, 4, 5, 7]), 5, 2),
    "cross_entropy_ignore": _index_case(lambda x, w, t: F.cross_entropy(x, t), torch.tensor([1, -100, 2, 0]),
                                        torch.tensor([1, -100, -3, 0]), 5, 2),
    "embedding": _index_case(lambda x, w, t: F.embedding(t, w), torch.tensor([[0, 3], [2, 1]]),
                             torch.tensor([[0, 3], [4, -1]]), 4, 2),
    "embedding_int32": _index_case(lambda x, w, t: F.embedding(t, w), torch.tensor([[0, 3], [2, 1]], dtype=torch.int32),
                                   torch.tensor([[0, 3], [2, 9]], dtype=torch.int32), 4, 3),
    "gather": _index_case(lambda x, w, t: torch.gather(x, 1, t), torch.tensor([[0], [4], [1], [1]]),
                          torch.tensor([[0], [4], [5], [1]]), 5, 2),
    "index_select": _index_case(lambda x, w, t: torch.index_select(x, 0, t), torch.tensor([0, 3]),
                                torch.tensor([0, 4]), 4, 1),
    "index_add": _index_case(lambda x, w, t: x.index_add(0, t, torch.ones(2, 5, device=x.device)), torch.tensor([0, 3]),
                             torch.tensor([-5, 3]), 4, 0),
    "scatter_add": _index_case(lambda x, w, t: x.scatter_add(1, t, torch.ones(4, 1, device=x.device)), torch.tensor([[0], [4], [1], [1]]),
                               torch.tensor([[0], [4], [1], [6]]), 5, 3),
    # torch's negative indices wrap (x[t], index_put): outside [-n, n) is the fault
    "index_wraps_negatives": _index_case(lambda x, w, t: x[t], torch.tensor([-1, 3, -4]), torch.tensor([-1, -5, 2]),
                                         4, 1),
    "index_two_tensors": _index_case(lambda x, w, t: x[t, t - 1], torch.tensor([0, -1, 3]), torch.tensor([0, 3, 4]),
                                     4, 2),
    "index_put_wraps_negatives": _index_case(lambda x, w, t: x.index_put((t,), w[:3, :1], accumulate=True),
                                             torch.tensor([-1, 0, -1]), torch.tensor([0, -5, 1]), 4, 1),
    "index_of_integers": _index_case(lambda x, w, t: x * torch.arange(4, device=x.device)[t].float()[:, None],
                                     torch.tensor([-1, 0, 1, 2]), torch.tensor([0, 1, 2, -9]), 4, 3),
    # a probability outside [0, 1] (the batch's): torch refuses it, NaN included
    "binary_cross_entropy_domain": (lambda x, w, t: F.binary_cross_entropy(t, torch.sigmoid(x[:, 0]).detach()) + x[0, 0],
                                    torch.tensor([0.5, 1.0, 0.0, 0.25]), torch.tensor([0.5, 1.0, 0.0, 1.5]), "domain", 3),
    # (the dividend is computed in the step: a traced step reads only its state and batch)
    "floor_divide": (lambda x, w, t: x * ((t * 5 - 7) // t).float()[:, None], torch.tensor([2, 3, -1, 1]),
                     torch.tensor([2, 3, 0, 0]), "division", 2),
    "div_trunc": (lambda x, w, t: x * torch.div(t * 5 - 7, t, rounding_mode="trunc").float()[:, None],
                  torch.tensor([2, 3, -1, 1]), torch.tensor([0, 3, -1, 1]), "division", 0),
    "remainder": (lambda x, w, t: x * torch.remainder(t * 5 - 7, t).float()[:, None],
                  torch.tensor([2, 3, -1, 1]), torch.tensor([2, 3, -1, 0]), "division", 3),
    "fmod_int32": (lambda x, w, t: x * torch.fmod(t * 5 - 7, t).float()[:, None],
                   torch.tensor([2, 3, -1, 1], dtype=torch.int32), torch.tensor([2, 0, -1, 1], dtype=torch.int32),
                   "division", 1),
}


def _run(fn, index, backend, trace=None):
    x, w = X.clone().requires_grad_(), W.clone().requires_grad_()
    with repops.deterministic(backend, trace=trace):
        out = fn(x, w, index)
        out.sum().backward()
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_backend_meets_the_fault_at_the_same_element_where_torch_refuses(name):
    fn, good, bad, rule, element = CASES[name]
    with pytest.raises((IndexError, RuntimeError)):  # torch refuses the input too: a fault is never a new meaning
        fn(X.clone(), W.clone(), bad)
    for backend in BACKENDS:
        _run(fn, good, backend)  # the clean input computes
        with pytest.raises(repops.Fault) as info:
            _run(fn, bad, backend)
        assert (info.value.rule, info.value.element) == (rule, element), (backend, info.value)
        assert isinstance(info.value, {"index": repops.IndexFault, "division": repops.DivisionFault,
                                       "domain": repops.DomainFault}[rule])


def _faulting_node(fn, index):
    """The node that raised, and its inputs, from a traced run (the trainer's way)."""
    x, w = X.clone().requires_grad_(), W.clone().requires_grad_()
    rec = StepRecorder([x, w], [index], chunk=16)
    with pytest.raises(repops.Fault) as info:
        with repops.deterministic("cpu", trace=rec):
            fn(x, w, index).sum().backward()
    node, inputs = rec.faulted()
    return node, inputs, info.value


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_decomposition_faults_where_the_step_does_and_keeps_its_structure(name):
    fn, good, bad, _, element = CASES[name]
    node, inputs, error = _faulting_node(fn, bad)
    run = OpRun(node.structure(), inputs, 16)
    kernels = run.kernels()
    k, e, rule = run.fault
    assert kernels[k].name == FAULT_KERNEL and (e, rule) == (error.element, error.rule) == (element, CASES[name][3])
    assert [x.name for x in kernels[:k]].count(FAULT_KERNEL) == 0  # the first fault kernel is where it faults
    # the same node on the clean index: the same kernels (structure never depends on values)
    clean = [t.clone() for t in inputs]
    clean[[i for i, t in enumerate(inputs) if t.dtype == bad.dtype and t.shape == bad.shape and torch.equal(t, bad)][-1]] = good
    other = OpRun(node.structure(), clean, 16)
    assert [x.structure() for x in other.kernels()] == [x.structure() for x in kernels] and other.fault is None


EDGE = {torch.int64: [-2**63, 2**63 - 1, -7, 7, 5, -1, 1], torch.int32: [-2**31, 2**31 - 1, -7, 7, 5, -1, 1]}
DIVISIONS = {"floor_divide": lambda a, b: a // b, "trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
             "floor": lambda a, b: torch.div(a, b, rounding_mode="floor"), "remainder": torch.remainder,
             "fmod": torch.fmod}


def _exact(op, a, b, bits):
    """The spec, in Python's integers: the exact result wrapped to `bits` (b != 0)."""
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # truncating
    v = {"floor_divide": a // b, "floor": a // b, "trunc": q, "remainder": a % b, "fmod": a - b * q}[op]
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def test_integer_division_never_traps_and_gives_the_spec_on_every_backend():
    """INT_MIN / -1 (torch's CPU truncating division dies of SIGFPE there) and every edge pair, in
    a child process so that a regression fails the test instead of killing the suite."""
    code = f"""
import itertools, torch, repops
from test_faults import DIVISIONS, EDGE, _exact
for dt, vals in EDGE.items():
    pairs = [(a, b) for a, b in itertools.product(vals, repeat=2)]
    a = torch.tensor([p[0] for p in pairs], dtype=dt); b = torch.tensor([p[1] for p in pairs], dtype=dt)
    for name, f in DIVISIONS.items():
        want = [_exact(name, x, y, 64 if dt == torch.int64 else 32) for x, y in pairs]
        for backend in {BACKENDS!r}:
            with repops.deterministic(backend):
                got = f(a, b)
            assert got.dtype == dt and got.tolist() == want, (dt, name, backend, got.tolist(), want)
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       cwd=str(__import__("pathlib").Path(__file__).parent))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stdout[-2000:], r.stderr[-3000:])


def test_a_noted_fault_computes_on_with_the_kernels_values():
    """What a decomposition (and a dishonest trainer) sees past a fault: the gather reads its
    fill (+0 for an index out of range), x / 0 = x % 0 = 0; on the fast path too."""
    from repops.faults import noted
    seen = []
    for backend in BACKENDS:
        with noted(lambda rule, e: seen.append((rule, e))), repops.deterministic(backend):
            g = torch.gather(X, 1, torch.tensor([[0], [9], [1], [-2]]))
            q = torch.tensor([7, 8, -9]) // torch.tensor([2, 0, 0])
            r = torch.remainder(torch.tensor([7, 8]), torch.tensor([0, 3]))
        assert g.view(torch.int32)[1:4:2].tolist() == [[0], [0]] and g[0, 0] == X[0, 0] and g[2, 0] == X[2, 1]
        assert q.tolist() == [3, 0, 0] and r.tolist() == [0, 2]
    assert seen == [("index", 1), ("division", 1), ("division", 0)] * len(BACKENDS)


# One-hot sums (embedding backward, index_add, index_put accumulate, EmbeddingBag): a non-finite
# term would be NaN in every other row (0 · inf); torch adds it to its own row only. The rule
# `domain` (faults.finite) makes it a fault claim: never that silent difference.
ONE_HOT = {  # name -> (fn(source), the source's shape, the flat element of the term checked)
    "index_add": (lambda s: torch.zeros(4, 5).index_add(0, torch.tensor([2, 0]), s), (2, 5), 7),
    "index_put_accumulate": (lambda s: torch.zeros(4, 5).index_put((torch.tensor([1, 1]),), s, accumulate=True),
                             (2, 5), 7),
    "embedding_backward": (lambda s: torch.ops.aten.embedding_dense_backward(s, torch.tensor([3, 0]), 4, -1, False),
                           (2, 5), 7),
    "embedding_bag": (lambda s: F.embedding_bag(torch.tensor([0, 1, 1]), s, torch.tensor([0, 2])), (2, 5), 7),
}


@pytest.mark.parametrize("name", sorted(ONE_HOT))
@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_a_one_hot_sum_of_a_non_finite_term_is_a_fault_never_nan_in_other_rows(name, bad):
    fn, shape, element = ONE_HOT[name]
    clean = torch.arange(10.0).reshape(shape) - 4.5
    poisoned = clean.clone()
    poisoned.view(-1)[element] = bad
    native = fn(poisoned)  # torch: the term lands in its own row only
    assert torch.isfinite(native).sum() >= native.numel() - native.shape[-1]
    expected = fn(clean)
    for backend in BACKENDS:
        with repops.deterministic(backend):
            torch.testing.assert_close(fn(clean), expected, rtol=1e-6, atol=0)  # (finite terms: torch's sums)
        with pytest.raises(repops.DomainFault) as info, repops.deterministic(backend):
            fn(poisoned)
        assert (info.value.rule, info.value.element) == ("domain", element), (backend, info.value)
