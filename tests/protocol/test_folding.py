"""Models we did not write as program jobs (tests/repops/model_zoo.py): export folds what a
step computes from constants alone (positions, causal and packed-sequence masks, rotary
tables, a no_grad block over them) into init, so every node of their step can be settled on
chain; folding keeps the step's bits; a cheater at an integer data move (the labels' padding) or at a select's
backward loses, off chain and on chain."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import repops
from offchain.dispute.context import Context
from offchain.protocol import program
from offchain.protocol.dataset import batch as batch_of, write_program_job
from offchain.protocol.jobfile import load
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "repops"))
from model_zoo import MODELS  # noqa: E402
from playing import honest_paid_on_chain, honest_wins_off_chain, off_chain  # noqa: E402
from stepping import program_and_module  # noqa: E402



class WithLoss(torch.nn.Module):
    def __init__(self, model, loss):
        super().__init__()
        self.model, self.loss_fn = model, loss

    def forward(self, *batch):
        return self.loss_fn(self.model, *batch)


def _labelled(model, ids, labels):
    return model(input_ids=ids, labels=labels).loss


def _seq2seq(model, ids, decoder_ids, labels):
    return model(input_ids=ids, decoder_input_ids=decoder_ids, labels=labels).loss


def zoo(name):
    """(module returning the loss, two batches). Integers derived from the ids are data, as a
    client would ship them (computed in forward, they are integer ops on the batch): a
    classifier's labels, T5's decoder inputs (its labels shifted right)."""
    model, make, loss = MODELS[name]()
    batches = [make(0), make(1)]
    if name in ("hf-bert", "hf-distilbert", "hf-roberta"):
        loss, batches = _labelled, [(ids, ids[:, 0] % 2) for ids, in batches]
    if name == "hf-t5":
        loss, batches = _seq2seq, [(ids, torch.nn.functional.pad(ids[:, :-1], (1, 0)), ids) for ids, in batches]
    return WithLoss(model, loss), batches


def zoo_job(name, directory, **kw):
    module, (b0, b1) = zoo(name)
    data = {f"x{i}": torch.cat([a, b]) for i, (a, b) in enumerate(zip(b0, b1))}
    return load(write_program_job(directory, module, data, list(data), steps=kw.pop("steps", 2),
                                  batch_size=b0[0].shape[0], **kw))


@pytest.mark.parametrize("name", MODELS)
def test_a_zoo_models_step_is_its_committed_graph_and_every_node_settles_on_chain(name, tmp_path):
    """The graph the client commits (one step on meta tensors) is the trace an honest trainer
    records, node for node (else the honest trainer loses at level 2), and no node of it
    needs the off-chain referee."""
    job = zoo_job(name, tmp_path / name)
    ctx = Context(job)
    traced = Trainer(job, tmp_path / "t", "t").step_trace(0)
    assert [n.structure() for n in traced.nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []


@pytest.mark.parametrize("name", ["hf-gpt2", "hf-llama-sdpa", "hf-bert", "hf-t5", "hf-vit", "nn-encoder", "nn-recurrent"])
def test_the_folded_program_keeps_the_modules_loss_and_every_gradient_bit_for_bit(name):
    """Against the module the client wrote, run eagerly under RepOps: folding (and exporting
    under RepOps' function routing) changes where constants are computed, never a bit."""
    module, (b0, _) = zoo(name)
    prog, state = program.export(module, b0)
    assert any(k.startswith("folded_") for k in state), "something was folded"
    folded = program.load(prog, {k: v.clone() for k, v in state.items()})
    (lf, gf), (le, ge) = program_and_module(folded, module, b0)
    assert lf.view(torch.int32).item() == le.view(torch.int32).item()
    assert gf and set(gf) <= set(ge) and len(gf) == len({id(g) for g in ge.values()})  # tied weights: one name
    for k in gf:
        assert torch.equal(gf[k].view(torch.int32), ge[k].view(torch.int32)), k


def test_a_write_to_state_is_never_folded():
    """Batch norm's counter is `num_batches_tracked += 1` on a buffer, an in-place op on a
    constant-looking input: it must stay a write of the state, step after step."""
    class Normed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.bn = torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)

        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.bn(self.lin(x)), y)
    torch.manual_seed(0)
    module, x, y = Normed(), torch.randn(8, 4), torch.randint(0, 3, (8,))
    prog, state = program.export(module, (x, y))
    exported = program.load(prog, {k: v.clone() for k, v in state.items()})
    for _ in range(2):
        with repops.deterministic():
            exported.loss(x, y).backward()
            module(x, y).backward()
    mine, theirs = dict(exported.named_buffers()), dict(module.named_buffers())
    assert int(mine["bn.num_batches_tracked"]) == 2 and mine.keys() == theirs.keys()
    for k in theirs:
        assert torch.equal(mine[k].reshape(-1).view(torch.uint8), theirs[k].reshape(-1).view(torch.uint8)), k


def test_a_folded_constant_repeated_per_row_or_head_is_stored_once(tmp_path):
    from safetensors.torch import load_file
    job = zoo_job("hf-gpt2", tmp_path / "gpt2")
    folded = {k: v for k, v in load_file(str(job.path(job.spec.init))).items() if k.startswith("folded_")}
    masks = [v for v in folded.values() if v.dtype == torch.bool]
    # (one [S, S] mask, [1, 1, S, S] before export built masks as eager does: never one per batch row or head)
    assert masks and all(math.prod(v.shape[:-2]) == 1 for v in masks), {k: v.shape for k, v in folded.items()}
    assert len({(v.dtype, tuple(v.shape), v.numpy().tobytes()) for v in folded.values()}) == len(folded)


def test_an_empty_value_made_from_constants_is_no_empty_state_tensor(tmp_path):
    """Hugging Face's cache starts as torch.tensor([]) and is concatenated with the keys:
    folded, it is one stored element sliced to nothing in the graph, since a state tensor of
    0 elements could not answer a delivery challenge (and is refused at load)."""
    class Cached(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x, y):
            h = torch.cat([torch.tensor([]), torch.zeros(0, 3), self.lin(x)], 0)  # (1-D empties: skipped by cat)
            return torch.nn.functional.cross_entropy(h, y)
    torch.manual_seed(0)
    data = {"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))}
    job = load(write_program_job(tmp_path / "job", Cached(), data, ["x", "y"], steps=2, batch_size=4, fanout=2))
    from offchain.protocol.dataset import initial_state
    assert min(t.numel() for t in initial_state(job).tensors()) == 1
    one, two = Trainer(job, tmp_path / "one", "one"), Trainer(job, tmp_path / "two", "two")
    assert one.train() == two.train()
    assert Context(job).kernel_graph.unsettled == []


def test_a_program_writing_through_a_view_is_functionalised_and_trains_as_traced(tmp_path):
    """T5 given only labels shifts them right into new_zeros(...)[..., 1:] in forward: the
    export is functionalised (slice_scatter, select_scatter), so the trace can name every
    producer; the shift's writes are described from what they mean (CAT, VIEW) and its
    masked fill by integer kernels, so every node settles on chain."""
    model, make, loss = MODELS["hf-t5"]()
    ids = torch.cat([make(0)[0], make(1)[0]])
    job = load(write_program_job(tmp_path / "t5", WithLoss(model, loss), {"ids": ids}, ["ids"], steps=2,
                                 batch_size=2))
    ctx = Context(job)
    ops = {decode_structure(s)[0] for s in ctx.graph.structures}
    assert {"aten.slice_scatter.default", "aten.select_scatter.default"} <= ops
    assert [n.structure() for n in Trainer(job, tmp_path / "t", "t").step_trace(0).nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []


class _SliceWriter(torch.nn.Module):
    """A recurrence writing each step's state into a float buffer, `out[:, t] = h` (RWKV's state,
    hand-written RNNs): functionalised into select_scatter(out, copy(out[:, t], h)), and autograd
    has no derivative for aten.copy. The second write broadcasts its value along the slice."""

    def __init__(self):
        super().__init__()
        self.cell, self.head = torch.nn.Linear(4, 4), torch.nn.Linear(6, 3)

    def forward(self, x, y):
        out, h = x.new_zeros(x.shape[0], x.shape[1], 6), x[:, 0]
        for t in range(x.shape[1]):
            h = torch.tanh(self.cell(h) + x[:, t])
            out[:, t, :4] = h
            out[:, t, 4:] = h.sum(-1, keepdim=True)
        return torch.nn.functional.cross_entropy(self.head(out.mean(1)), y)


def test_a_program_writing_float_slices_trains_with_the_modules_bits_and_a_cheater_at_a_write_loses(tmp_path):
    """The writes are exported as clone(expand(value)) (program._differentiable_copies): the
    loss and every gradient are the module's own under RepOps bit for bit, every node settles,
    and a trainer changing a written element loses. (A clone's commitment is its input's, by
    construction: the changed element is caught where the write reads it, level 4.)"""
    torch.manual_seed(0)
    model = _SliceWriter()
    data = {"x": torch.randn(8, 3, 4), "y": torch.randint(0, 3, (8,))}
    batch = (data["x"][:4], data["y"][:4])
    artifact, state, _ = program.exported(model, batch)
    prog = program.load(artifact, {k: v.clone() for k, v in state.items()})
    ops = {str(n.target) for n in prog.graph.nodes if n.op == "call_function"}
    assert "aten.copy.default" not in ops and {"aten.select_scatter.default", "aten.expand.default"} <= ops, ops
    runs = []
    for m in (prog, model):
        m.zero_grad(set_to_none=True)
        with repops.deterministic():
            loss = m(*batch)
            loss.backward()
        runs.append([loss.detach()] + [p.grad for _, p in sorted(m.named_parameters())])
    assert len(runs[0]) == len(runs[1]) == 5
    assert all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in zip(*runs))
    job = load(write_program_job(tmp_path / "job", model, data, ["x", "y"], steps=2, batch_size=4, fanout=2))
    ctx = Context(job)
    assert ctx.kernel_graph.unsettled == []
    honest = Trainer(job, tmp_path / "honest", "honest")
    honest.train()
    structures = [decode_structure(s) for s in ctx.graph.structures]
    clone = next(j for j, s in enumerate(structures) if s[0] == "aten.clone.default")
    write = next(j for j, s in enumerate(structures) if any(r.kind == 0 and r.index == clone for r in s[2]))
    assert structures[write][0] == "aten.slice_scatter.default"
    bad = Trainer(job, tmp_path / "cheat", "cheater", behaviour=A.CorruptValue(step=1, node=clone, element=1))
    bad.train()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.node == write and v.level == 4, str(v)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpt2")
    job = zoo_job("hf-gpt2", d / "job", steps=3, fanout=2, chunk=64)
    honest = Trainer(job, d / "honest", "honest")
    honest.train()
    return job, Context(job), honest, d


def _node(ctx, op):
    return next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == op)


def test_a_cheater_at_the_labels_padding_loses(gpt2):
    """Hugging Face's causal-LM loss pads the int64 labels with -100: described as a CAT of
    the batch's labels over an int64 background (no longer a MAT), the node is one the
    on-chain game can decide; a changed label is not what its decomposition gives."""
    job, ctx, honest, d = gpt2
    pad = _node(ctx, "aten.constant_pad_nd.default")
    labels = batch_of(job, 1)[0].flatten()
    element = next(i for i in range(1, labels.numel()) if labels[i] < 99)  # stays a token id
    bad = Trainer(job, d / "pad-cheat", "cheater", behaviour=A.CorruptValue(step=1, node=pad, element=element))
    assert bad.train() != honest.final_claim()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.node == pad and v.level == 3, str(v)


def test_the_labels_padding_cheater_loses_on_chain_and_the_honest_trainer_is_paid(settle_match, gpt2):
    job, ctx, honest, d = gpt2
    pad = _node(ctx, "aten.constant_pad_nd.default")
    bad = Trainer(job, d / "pad-cheat-chain", "cheater", behaviour=A.CorruptValue(step=2, node=pad, element=1))
    bad.train()
    honest_paid_on_chain(settle_match, job, ctx, bad, honest, level=3)


def test_a_cheater_at_a_selects_backward_loses(tmp_path):
    job = zoo_job("nn-encoder", tmp_path / "enc", steps=3, fanout=2)
    ctx = Context(job)
    node = _node(ctx, "aten.select_backward.default")
    honest = Trainer(job, tmp_path / "honest", "honest")
    honest.train()
    user = next(j for j, s in enumerate(ctx.graph.structures) if any(
        r.kind == 0 and r.index == node for r in decode_structure(s)[-1]))
    slot = next(i for i, r in enumerate(decode_structure(ctx.graph.structures[user])[-1]) if r.index == node)
    grad = honest.node_input(1, user, slot).flatten()
    element = int(grad.nonzero()[0])  # inside the selected slice (a zero beside it would be absorbed)
    bad = Trainer(job, tmp_path / "cheater", "cheater", behaviour=A.CorruptValue(step=1, node=node, element=element,
                                                                                   ulps=1 << 12))
    bad.train()
    v = off_chain(ctx, bad, honest)
    assert v.winner == "honest" and v.losers == ["cheater"] and v.node == node and v.level == 3, str(v)


def test_a_constant_tensor_the_step_writes_in_place_stays_computed_in_the_graph():
    """`torch.zeros(n).add_(h)` (a buffer made in forward, then written with a value of the step):
    the zeros are a constant, but a lifted constant is a compacted, expanded view that is never
    written, so it stays a node of the graph."""
    class Accumulates(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x, y):
            acc = torch.zeros(8, 3)
            acc.add_(self.lin(x))
            return torch.nn.functional.cross_entropy(acc, y)
    torch.manual_seed(0)
    module, x, y = Accumulates(), torch.randn(8, 4), torch.randint(0, 3, (8,))
    prog, state = program.export(module, (x, y))
    exported = program.load(prog, {k: v.clone() for k, v in state.items()})
    with repops.deterministic():
        mine, theirs = exported.loss(x, y), module(x, y)
    assert torch.equal(mine.view(torch.int32), theirs.view(torch.int32))


def test_a_size_read_from_constants_is_folded_into_the_program():
    """Funnel's relative positions: torch.arange(t0, t1, -s) of 0-d tensors computed from
    constants. torch.export writes their sizes as `item`, `sym_size`, `<=` and `-` nodes (Python
    arithmetic a program may not call); folding computes them once, checks torch.export's
    assertion on them, writes the numbers where they are read and gives the nodes downstream
    their plain shapes. The program then holds aten operators only and steps with the module's
    bits."""
    import operator

    class Relative(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(16, 4))

        def forward(self, x):
            pos = torch.arange(0, x.shape[1])
            start, stop = pos[-1] - pos[0] + 1, pos[0] - pos[-1] - 1  # 0-d tensors from constants
            rel = torch.arange(start, stop, -1)  # its length is a number read from them
            r = self.table[rel + 8]  # (len(rel), 4)
            s = (x @ r.T)[:, :, : r.shape[0] - 1]  # a size computed from it
            return s.square().mean()
    torch.manual_seed(0)
    module, x = Relative(), torch.randn(2, 5, 4)
    prog, state = program.export(module, (x,))
    exported = program.load(prog, {k: v.clone() for k, v in state.items()})
    targets = {n.target for n in exported.graph.nodes if n.op == "call_function"}
    assert not targets & {operator.le, operator.sub, operator.add, torch.ops.aten.item.default,
                          torch.ops.aten._assert_scalar.default}, targets
    runs = []
    for m in (exported, module):
        m.zero_grad(set_to_none=True)
        with repops.deterministic():
            out = m(x)
            out.backward()
        runs.append((out.detach(), dict(m.named_parameters())["table"].grad))
    (lp, gp), (lm, gm) = runs
    assert torch.equal(lp.view(torch.int32), lm.view(torch.int32))
    assert torch.equal(gp.view(torch.int32), gm.view(torch.int32))
