"""Dropout in a job (docs/PROTOCOL.md §5, NUMERICS.md §12): a program whose model drops is
exported with a step counter in its state and its masks keyed by the job's seed, so its
committed graph is the honest trace, every node (the Philox mask included) settles on chain,
it trains with the same bits on any thread count, and a trainer that flips one mask element
loses at level 5, off chain and on chain, where the honest trainer is paid."""
import pytest
import torch

from offchain.dispute.context import Context
from offchain.protocol import program
from offchain.protocol.dataset import initial_state, write_program_job
from offchain.protocol.jobfile import load
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_paid_on_chain, honest_wins_off_chain, trained
from small_job import DropoutNet, write_dropout_job

DROPOUT = "repops.dropout.default"


@pytest.fixture(scope="module")
def dropout_job(tmp_path_factory):
    d = tmp_path_factory.mktemp("dropout")
    return (*trained(write_dropout_job(d / "job"), d), d)


def test_a_dropout_job_is_its_trace_settles_everywhere_and_trains_the_same_bits_on_any_thread_count(
        dropout_job, monkeypatch):
    job, ctx, honest, d = dropout_job
    assert [decode_structure(s)[0] for s in ctx.graph.structures].count(DROPOUT) == 1
    assert [n.structure() for n in honest.step_trace(1).nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []
    monkeypatch.setenv("REPOPS_NUM_THREADS", "1")
    assert Trainer(job, d / "one-thread", "one").train() == honest.final_claim()


def test_the_program_counts_its_steps_and_draws_a_new_mask_each_one(dropout_job):
    job, _, _, _ = dropout_job
    st = initial_state(job)
    assert program.DROPOUT_STEP in dict(st.model.named_buffers())
    x, y = torch.randn(8, 12), torch.zeros(8, dtype=torch.long)
    import repops
    with repops.deterministic():
        first, second = st.model.loss(x, y), st.model.loss(x, y)  # the same batch, steps 1 and 2
    assert dict(st.model.named_buffers())[program.DROPOUT_STEP].item() == 2.0
    assert not torch.equal(first, second)


def test_a_model_without_active_dropout_exports_as_before():
    _, state = program.export(DropoutNet().eval(), (torch.randn(8, 12), torch.zeros(8, dtype=torch.long)))
    assert program.DROPOUT_STEP not in state and "f.0.weight" in state


def _node(ctx):
    return next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == DROPOUT)


def _mask_cheater(job, d, name, step):
    """Flips one element of the Philox kernel's mask (kernel 1: after the step's conversion)
    and computes the rest of the op from it: consistent at every level but the primitive."""
    bad = Trainer(job, d / name, "cheater", behaviour=A.KernelCheat(step=step, op=DROPOUT, kernel=1, element=5))
    bad.train()
    return bad


def test_a_trainer_that_flips_a_mask_element_loses_at_the_philox_step(dropout_job):
    job, ctx, honest, d = dropout_job
    bad = _mask_cheater(job, d, "flip", 2)
    assert bad.final_claim() != honest.final_claim()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.node == _node(ctx) and v.level == 5, str(v)
        assert "Philox" in v.reason, v.reason


def test_the_mask_flipper_loses_on_chain_and_the_honest_trainer_is_paid(settle_match, dropout_job):
    job, ctx, honest, d = dropout_job
    honest_paid_on_chain(settle_match, job, ctx, _mask_cheater(job, d, "flip-chain", 3), honest, level=5)


def test_hugging_face_gpt2_with_its_dropouts_is_a_job_whose_every_node_settles(tmp_path):
    """GPT-2's embedding, attention (SDPA's dropout_p) and residual dropouts, as configured."""
    import transformers as T
    torch.manual_seed(0)
    cfg = T.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.1,
                       embd_pdrop=0.1, attn_pdrop=0.1, attn_implementation="sdpa")

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = T.GPT2LMHeadModel(cfg).float()

        def forward(self, ids):
            return self.model(input_ids=ids, labels=ids).loss
    ids = torch.randint(0, 100, (4, 8), generator=torch.Generator().manual_seed(2))
    job = load(write_program_job(tmp_path / "gpt2", LM(), {"ids": ids}, ["ids"], steps=2, batch_size=2, seed=5,
                                 fanout=2, chunk=64))
    ctx = Context(job)
    structures = [decode_structure(s)[0] for s in ctx.graph.structures]
    assert structures.count(DROPOUT) == 1 + 2 * 3  # embeddings; per layer attention, attention out, MLP out
    assert ctx.kernel_graph.unsettled == []
    honest = Trainer(job, tmp_path / "t", "t")
    honest.train()
    assert [n.structure() for n in honest.step_trace(1).nodes] == ctx.graph.structures
