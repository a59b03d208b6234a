"""Level 3's descriptors name, for each kernel operand, the latest source whose memory holds it
(offchain/dispute/oprun.py _Sources). The search looks only at the sources over the same
memory, keyed by the memory a tensor lends (every .numpy() of a tensor is a new array object):
a fold over a long row (the 125 M job's 24,576-class log_softmax backward) scanned every
earlier source for every kernel, quadratic (python benchmarks/level3_sources.py). The keyed
search must name exactly the sources the full scan names, and look at few of them."""
import pytest
import torch

import repops
from offchain.dispute import oprun as O
from offchain.protocol.trace import STATE, StepRecorder


def _full_scan(self, a):
    """The reference: the latest of every source that holds a's memory."""
    return None if a.size == 0 else self.scan(a, *self.span(a))


def _node(fn, *inputs):
    """The last node a traced run of fn records, and the inputs it read."""
    start = [t.clone() for t in inputs]
    rec = StepRecorder(list(inputs), [], chunk=64, keep=True)
    with repops.deterministic(trace=rec):
        fn(*inputs)
    node = rec.nodes[-1]
    return node, [start[r.index] if r.kind == STATE else rec.outputs[r.index][r.slot] for r in node.refs]


def _cases():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 300, generator=g)
    y = torch.log_softmax(x, -1)
    w = torch.randn(5, 7, generator=g)
    base = torch.randn(6, 8, generator=g)
    return {
        "a fold over a long row": (lambda a, b: torch.ops.aten._log_softmax_backward_data(a, b, -1, torch.float32),
                                   [torch.ones_like(y), y]),
        "a product with a transposed operand": (lambda a, b: a @ b.t(), [torch.randn(4, 7, generator=g), w]),
        "two inputs over one storage": (lambda a, b: torch.ops.aten.add(a, b), [base[:, :4], base[:, 4:]]),
        "overlapping views of one storage": (lambda a, b: torch.ops.aten.mul(a, b), [base[:5], base[1:]]),
        "in place": (lambda a, b: torch.ops.aten.add_(a, b), [torch.randn(6, 8, generator=g), base]),
    }


@pytest.mark.parametrize("case", sorted(_cases()))
def test_the_keyed_search_names_the_sources_the_full_scan_names(case, monkeypatch):
    fn, inputs = _cases()[case]
    node, ins = _node(fn, *inputs)
    keyed = [k.structure() for k in O.OpRun(node.structure(), ins, 64).kernels(commit_all=False)]
    monkeypatch.setattr(O._Sources, "_find", _full_scan)
    scanned = [k.structure() for k in O.OpRun(node.structure(), ins, 64).kernels(commit_all=False)]
    assert keyed == scanned


def test_a_fold_looks_at_a_few_sources_per_operand_not_every_earlier_one(monkeypatch):
    n = 2000
    y = torch.log_softmax(torch.randn(2, n), -1)
    node, inputs = _node(lambda a, b: torch.ops.aten._log_softmax_backward_data(a, b, -1, torch.float32),
                         torch.ones_like(y), y)
    looked, within = [0], O._Sources._within

    def counted(self, *args):
        looked[0] += 1
        return within(self, *args)
    monkeypatch.setattr(O._Sources, "_within", counted)
    kernels = O.OpRun(node.structure(), inputs, 64).kernels(commit_all=False)
    assert len(kernels) > n
    assert looked[0] <= 4 * len(kernels), f"{looked[0]} sources looked at for {len(kernels)} kernels"


def _more_cases():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(4, 6, generator=g)
    return {**_cases(),
            "softmax backward": (lambda a, b: torch.ops.aten._softmax_backward_data(a, b, -1, torch.float32),
                                 [torch.randn(4, 6, generator=g), torch.softmax(x, -1)]),
            "layer norm": (lambda a, w, b: torch.nn.functional.layer_norm(a, (6,), w, b),
                           [x, torch.randn(6, generator=g), torch.randn(6, generator=g)]),
            "a concatenation": (lambda a, b: torch.cat([a, b, a], 1), [x, torch.randn(4, 3, generator=g)]),
            "a sum over a middle dim": (lambda a: a.sum(1), [torch.randn(3, 40, 5, generator=g)])}


@pytest.mark.parametrize("case", sorted(_more_cases()))
def test_giving_back_unreachable_sources_changes_no_descriptor(case, monkeypatch):
    """Swept after every kernel vs never swept: the same kernel structures."""
    fn, inputs = _more_cases()[case]
    node, ins = _node(fn, *inputs)
    monkeypatch.setattr(O, "_SWEEP_BYTES", 0)  # after every source
    swept = [k.structure() for k in O.OpRun(node.structure(), ins, 64).kernels(commit_all=False)]
    monkeypatch.setattr(O._Sources, "sweep", lambda self: None)
    monkeypatch.setattr(O, "_SWEEP_BYTES", 1 << 60)
    kept = [k.structure() for k in O.OpRun(node.structure(), ins, 64).kernels(commit_all=False)]
    assert swept == kept


def test_a_matmul_keeps_a_bounded_number_of_its_accumulators(monkeypatch):
    """K = 1,024 accumulators of [16, 16]: the sources alive stay near the sweep interval's
    worth, not K of them (a 125 M model's output layer would hold 200 GB)."""
    g = torch.Generator().manual_seed(2)
    node, ins = _node(lambda a, b: a @ b, torch.randn(16, 1024, generator=g), torch.randn(1024, 16, generator=g))
    most, add = [0], O._Sources.add

    def counted(self, a):
        add(self, a)
        most[0] = max(most[0], sum(x.nbytes for x in self.arrays if x.flags.owndata))
    monkeypatch.setattr(O._Sources, "add", counted)
    kernels = O.OpRun(node.structure(), ins, 64).kernels(commit_all=False)
    acc = 16 * 16 * 4
    assert len(kernels) > 1024 and most[0] <= 3 * O._SWEEP_ADDS * acc, f"{most[0] // acc} accumulators alive"
