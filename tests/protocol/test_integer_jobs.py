"""Integers computed from the batch in a job (docs/NUMERICS.md §13, PROTOCOL.md §7): a
program that derives masks, counts and labels from its token ids decomposes them into
integer kernels, so every node settles on chain; a trainer that changes one element of an
integer kernel loses at level 5 (at level 4 when it changes it after committing it), off
chain (both seat orders) and on chain, where the honest
trainer is paid; Hugging Face models given their attention mask, with labels computed in
forward (T5 shifting its own), are jobs whose every node settles; an integer op with no kernels
(an integer product) is still refused at post, naming its node."""
import sys
from pathlib import Path

import pytest
import torch

from offchain.chain.verde import NotSettleableOnChain, Verde
from offchain.dispute.context import Context
from offchain.protocol.dataset import write_program_job
from offchain.protocol.jobfile import load
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_paid_on_chain, honest_wins_off_chain, trained
from small_job import write_unsettled_integer_job, write_integer_job

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "repops"))
from model_zoo import MODELS  # noqa: E402
from test_folding import WithLoss  # noqa: E402

COUNT = "aten.sum.dim_IntList"
PAY, STAKE = 3 * 10**18, 10**18


@pytest.fixture(scope="module")
def integer_job(tmp_path_factory):
    d = tmp_path_factory.mktemp("integers")
    return (*trained(write_integer_job(d / "job"), d), d)


def test_a_job_computing_integers_from_its_batch_is_its_trace_and_settles_on_chain(integer_job):
    job, ctx, honest, _ = integer_job
    ops = {decode_structure(s)[0] for s in ctx.graph.structures}
    assert {"aten.ne.Scalar", COUNT, "aten.remainder.Scalar", "aten._to_copy.default"} <= ops
    assert [n.structure() for n in honest.step_trace(2).nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []


def _node(ctx):
    return next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == COUNT)


def _count_cheater(job, d, name, step, after_commit=False):
    """Adds 1 to one row's partial token count (an add.i64 of the sum: the last, or after
    committing the one before it, so that the last reads another value than it holds) and
    computes on from it."""
    bad = Trainer(job, d / name, "cheater", behaviour=A.KernelCheat(
        step=step, op=COUNT, from_end=3 if after_commit else 2, element=1, after_commit=after_commit))
    bad.train()
    return bad


@pytest.mark.parametrize("after_commit", [False, True])
def test_a_trainer_that_miscounts_loses_at_the_integer_kernel(integer_job, after_commit):
    job, ctx, honest, d = integer_job
    bad = _count_cheater(job, d, f"miscount-{after_commit}", 2, after_commit)
    assert bad.final_claim() != honest.final_claim()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.node == _node(ctx) and v.level == (4 if after_commit else 5), str(v)
        assert after_commit or ("exact integers" in v.reason and "add.i64" in v.reason), v.reason


def test_the_miscounter_loses_on_chain_and_the_honest_trainer_is_paid(settle_match, integer_job):
    job, ctx, honest, d = integer_job
    honest_paid_on_chain(settle_match, job, ctx, _count_cheater(job, d, "miscount-chain", 1), honest, level=5)


def _labels(name):
    """A classifier's label by a rule on the ids; a language model's labels masked to -100
    where the mask is 0 (T5 shifts them right into its decoder inputs itself)."""
    if name in ("hf-bert", "hf-roberta"):
        return lambda ids, mask: (ids[:, 0] + ids[:, 1]) % 2
    return lambda ids, mask: ids.masked_fill(mask == 0, -100)


@pytest.mark.parametrize("name", ["hf-llama-sdpa", "hf-gpt2", "hf-t5", "hf-bert", "hf-roberta"])
def test_a_hugging_face_model_given_its_attention_mask_is_a_job_whose_every_node_settles(name, tmp_path):
    """As users write it: the padding mask in the batch (which the program moves to the
    device it runs on: the graph on meta, training on CPU or CUDA) and labels computed in
    forward."""
    model, make, _ = MODELS[name]()
    ids = torch.cat([make(0)[0], make(1)[0]])
    mask = torch.ones_like(ids)
    mask[:, -3:] = 0
    mask[0, -1] = 1
    label = _labels(name)
    module = WithLoss(model, lambda m, ids, mask: m(input_ids=ids, attention_mask=mask, labels=label(ids, mask)).loss)
    job = load(write_program_job(tmp_path / "job", module, {"ids": ids, "mask": mask}, ["ids", "mask"], steps=2,
                                 batch_size=2))
    ctx = Context(job)
    assert [n.structure() for n in Trainer(job, tmp_path / "t", "t").step_trace(1).nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []


def test_an_integer_op_without_kernels_is_refused_at_post_naming_its_node(embedded, tmp_path):
    job = load(write_unsettled_integer_job(tmp_path / "j"))
    ctx = Context(job)
    j, op = ctx.kernel_graph.unsettled[0]
    assert op == "aten.prod.dim_int"
    with pytest.raises(NotSettleableOnChain, match=rf"node {j} \(aten.prod.dim_int\).*integers computed from"):
        Verde.deploy(embedded).post(job, ctx, PAY, STAKE, client=embedded.accounts[1])
