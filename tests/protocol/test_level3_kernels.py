"""Level 3 re-runs a node's decomposition under prims.observe; its map primitives (a matmul's k
fma steps above all, which numpy emulates in binary64) are computed by the CPU backend's
compiled kernels (offchain/dispute/oprun.py _map_kernels): every kernel of the run, its
operands' and output's commitments and its descriptor, must be what the numpy reference gives,
and the fault it finds the same."""
import numpy as np
import pytest
import torch

from offchain.dispute import oprun as O
from test_oprun_sources import _node


def _cases():
    g = torch.Generator().manual_seed(5)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    sub = torch.tensor([1e-40, -3e-39, 2.0, -0.0, float("inf"), float("nan")])
    return {
        "matmul": (lambda a, b: a @ b, [r(9, 33), r(33, 17)]),
        "batched matmul, transposed": (lambda a, b: torch.bmm(a, b.transpose(1, 2)), [r(2, 5, 12), r(2, 7, 12)]),
        "log_softmax backward": (lambda a, b: torch.ops.aten._log_softmax_backward_data(a, b, -1, torch.float32),
                                 [r(3, 70), torch.log_softmax(r(3, 70), -1)]),
        "layer norm": (lambda x, w, b: torch.nn.functional.layer_norm(x, (16,), w, b), [r(4, 16), r(16), r(16)]),
        "gelu": (lambda x: torch.nn.functional.gelu(x), [torch.cat([r(40), sub])]),
        "silu backward": (lambda gr, x: torch.ops.aten.silu_backward(gr, x), [r(50), torch.cat([r(44), sub])]),
        "division with subnormals": (lambda a, b: a / b, [torch.cat([r(10), sub]), torch.cat([sub, r(10)])]),
        "sqrt of negatives": (lambda a: torch.sqrt(a), [r(30)]),
    }


CASES = _cases()


def _run(monkeypatch, flag, fn, ins):
    monkeypatch.setenv("VERDE_LEVEL3_KERNELS", flag)
    node, inputs = _node(fn, *[t.clone() for t in ins])
    run = O.OpRun(node.structure(), inputs, 16)
    kernels = run.kernels()
    kept = [run.kernels(keep=k, commit_all=False)[k] for k in (0, len(kernels) - 2)]
    return kernels, kept, run.fault


@pytest.mark.parametrize("case", list(CASES))
def test_level3_with_compiled_map_kernels_is_the_references_run(monkeypatch, case):
    fn, ins = CASES[case]
    calls = []
    assert "fma" in O._compiled_maps()  # (the C library is built here: the fast path must be taken)
    counted = {n: (lambda *a, _k=k: calls.append(1) or _k(*a)) for n, k in O._compiled_maps().items()}
    monkeypatch.setattr(O, "_compiled_maps", lambda: counted)
    fast, fast_kept, fast_fault = _run(monkeypatch, "1", fn, ins)
    assert calls, "no map primitive was computed by a compiled kernel"
    ref, ref_kept, ref_fault = _run(monkeypatch, "0", fn, ins)
    assert [k.encode() for k in fast] == [k.encode() for k in ref]
    assert fast_fault == ref_fault
    for a, b in zip(fast_kept, ref_kept):
        assert np.array_equal(a.out_array.view(np.uint8), b.out_array.view(np.uint8))
