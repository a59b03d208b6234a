"""A trace must not depend on who else in the process holds a tensor. Autograd chooses by
reference counts: AccumulateGrad hands a gradient to p.grad by detach when nothing else holds
it and by new_empty_strided + copy_ otherwise, and a seed made while the loss is held elsewhere
is detached first. An honest trainer under a debugger, a profiler, a sampling thread or a kept
traceback recorded other nodes than its first run, and lost its stake at level 2 (found by
benchmarks/scale.py at 125 M parameters with a stack sampler running). The step now takes its
gradients by autograd.grad, and detach is an alias, not a node (repops.aten.ALIASES)."""
import collections
import contextlib
import dataclasses
import sys

import pytest

from offchain.dispute.context import Context
from offchain.protocol.corpus import token_rows
from offchain.protocol.dataset import write_job
from offchain.protocol.jobfile import load
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_wins_off_chain
from small_job import write_small_job

LLAMA = {"vocab": 256, "d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 64, "max_seq": 16}


@dataclasses.dataclass
class HoldsReferences(A.Honest):
    """Honest arithmetic, but the process keeps the last `keep` op outputs alive (a logging
    hook, a debugger's variables view): every tensor has one more reference than usual."""
    keep: int = 1 << 30

    def __post_init__(self):
        self.held = collections.deque(maxlen=self.keep)

    def after_record(self, step, index, func, args, kwargs, out):
        self.held.append(out)


class _KeepsFrames:
    """sys.setprofile keeping the last returned frames alive (what a sampling profiler or a
    stored traceback does): their locals outlive the call."""

    def __init__(self, n=64):
        self.frames = collections.deque(maxlen=n)

    def __call__(self, frame, event, arg):
        if event == "return":
            self.frames.append(frame)

    def __enter__(self):
        sys.setprofile(self)

    def __exit__(self, *exc):
        sys.setprofile(None)
        self.frames.clear()


def _jobs(tmp_path):
    tokens = {"tokens": token_rows(16, rows=16)}
    return {"llama": write_job(tmp_path / "llama", "llama", LLAMA, tokens, steps=2, batch_size=2, fanout=2, chunk=64),
            "llama, 2 micro-batches": write_job(tmp_path / "micro", "llama", LLAMA, tokens, steps=2, batch_size=4,
                                                fanout=2, chunk=64, micro_batches=2),
            "mlp": write_small_job(tmp_path / "mlp")}


def _leaves(job, d, behaviour=None, around=None):
    tr = Trainer(job, d, "t", **({"behaviour": behaviour} if behaviour else {}))
    st = tr._fresh_state()
    with around or contextlib.nullcontext():
        rec = tr._traced(st, 0)
    return [n.leaf() for n in rec.nodes]


def test_a_traced_step_is_the_same_whoever_else_holds_its_tensors(tmp_path):
    for name, path in _jobs(tmp_path).items():
        job = load(path)
        clean = _leaves(job, tmp_path / name / "clean")
        assert _leaves(job, tmp_path / name / "last", HoldsReferences(keep=1)) == clean, name
        assert _leaves(job, tmp_path / name / "all", HoldsReferences()) == clean, name
        assert _leaves(job, tmp_path / name / "frames", around=_KeepsFrames()) == clean, name
        graph = Context(job).graph.structures  # the client's graph (meta tensors) is the trace's
        assert len(graph) == len(clean), name


def test_an_honest_trainer_holding_references_wins_and_claims_what_a_clean_one_does(tmp_path):
    job = load(write_job(tmp_path / "job", "llama", LLAMA, {"tokens": token_rows(16, rows=16)}, steps=2,
                         batch_size=2, fanout=2, chunk=64))
    ctx = Context(job)
    clean = Trainer(job, tmp_path / "clean", "clean")
    holding = Trainer(job, tmp_path / "holding", "honest", behaviour=HoldsReferences())
    assert holding.train() == clean.train()
    node = [decode_structure(x)[0] for x in ctx.graph.structures].index("repops.attention.default")
    cheater = Trainer(job, tmp_path / "cheater", "cheater",
                      behaviour=A.CorruptValue(step=1, node=node, element=3, ulps=64))
    cheater.train()
    for v in honest_wins_off_chain(ctx, holding, cheater):
        assert v.level == 5, str(v)


@pytest.mark.parametrize("keep", [1, 3])
def test_no_detach_is_a_node(tmp_path, keep):
    """detach is an alias: neither the client's graph nor a trace has one."""
    job = load(write_small_job(tmp_path / "mlp"))
    tr = Trainer(job, tmp_path / "t", "t", behaviour=HoldsReferences(keep=keep))
    ops = [n.op for n in tr._traced(tr._fresh_state(), 0).nodes]
    graph_ops = [decode_structure(x)[0] for x in Context(job).graph.structures]
    assert ops == graph_ops
    assert "aten.detach.default" not in ops and "aten.new_empty_strided.default" not in ops
