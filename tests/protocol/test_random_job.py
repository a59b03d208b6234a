"""Random numbers inside a job (issue #39; docs/PROTOCOL.md §5, NUMERICS.md §12): a program
whose forward draws features (randint), torch.randn_like noise, decides per layer with torch.rand (layerdrop
written as data), drops paths (`torch.empty(..).bernoulli_`) and samples labels (multinomial) is exported with the job's key, its committed graph is the honest trace, every
node settles on chain, it trains with the same bits on 1 and 2 threads, and a trainer that
flips one random bit loses at level 5, off chain and on chain. Hugging Face's layerdrop, a Python
branch on a draw, cannot be one committed graph: export says so and what to write instead."""
import pytest
import torch

from offchain.protocol import program
from offchain.protocol.dataset import write_program_job
from offchain.protocol.job import JobError
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_paid_on_chain, honest_wins_off_chain, trained

DROPOUT = "repops.dropout.default"  # the Philox op every draw is made of
pytestmark = pytest.mark.xdist_group("random_job")  # one worker trains the module's job once


class NoisyLayerDrop(torch.nn.Module):
    def __init__(self, p=0.3):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))
        self.head, self.p = torch.nn.Linear(8, 3), p

    def forward(self, x, y):
        h = x[:, torch.randint(0, 8, (8,))] + 0.1 * torch.randn_like(x)  # features drawn with repetition
        for layer in self.layers:  # layerdrop as data: one graph whatever the draw
            h = torch.where(torch.rand([]) < self.p, h, h + torch.tanh(layer(h)))
        h = h * torch.empty(h.shape[0], 1).bernoulli_(0.9)  # drop path as timm writes it (into a new tensor)
        logits = self.head(h)
        k = torch.multinomial(torch.softmax(logits.detach(), -1), 1)[:, 0]  # a sampled label (self-distillation)
        return torch.nn.functional.cross_entropy(logits, y) + 0.1 * torch.nn.functional.cross_entropy(logits, k)


@pytest.fixture(scope="module")
def random_job(tmp_path_factory):
    d = tmp_path_factory.mktemp("random")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = {"x": torch.randn(32, 8, generator=g), "y": torch.randint(0, 3, (32,), generator=g)}
    job_file = write_program_job(d / "job", NoisyLayerDrop(), data, ["x", "y"], steps=4, batch_size=8, seed=3,
                                 fanout=2, chunk=64)
    return (*trained(job_file, d), d)


def test_a_job_that_draws_is_its_trace_settles_everywhere_and_trains_the_same_bits_on_any_thread_count(
        random_job, monkeypatch):
    job, ctx, honest, d = random_job
    ops = [decode_structure(s)[0] for s in ctx.graph.structures]
    assert ops.count(DROPOUT) == 1 + 1 + 3 + 1 + 1  # randint, randn_like, three rand([]), bernoulli_, multinomial
    assert "aten.log.default" in ops and "aten.cos.default" in ops  # Box-Muller
    assert [n.structure() for n in honest.step_trace(1).nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []
    monkeypatch.setenv("REPOPS_NUM_THREADS", "1")
    assert Trainer(job, d / "one-thread", "one").train() == honest.final_claim()


def _draw_flipper(job, d, name, step):
    """Flips the top Philox bit of the first draw, randint's (kernel 1 of the first Philox op): another feature."""
    bad = Trainer(job, d / name, "cheater", behaviour=A.KernelCheat(step=step, op=DROPOUT, kernel=1, element=0))
    bad.train()
    return bad


def test_a_trainer_that_flips_a_random_bit_loses_at_the_philox_element(random_job):
    job, ctx, honest, d = random_job
    bad = _draw_flipper(job, d, "flip", 2)
    assert bad.final_claim() != honest.final_claim()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.level == 5 and "Philox" in v.reason, str(v)


def test_the_draw_flipper_loses_on_chain_and_the_honest_trainer_is_paid(settle_match, random_job):
    job, ctx, honest, d = random_job
    honest_paid_on_chain(settle_match, job, ctx, _draw_flipper(job, d, "flip-chain", 3), honest, level=5)


def test_hugging_face_layerdrop_is_a_python_branch_export_names_and_says_what_to_write():
    import transformers as T
    cfg = T.OPTConfig(vocab_size=32, hidden_size=8, num_hidden_layers=2, ffn_dim=16, num_attention_heads=2,
                      max_position_embeddings=16, word_embed_proj_dim=8, layerdrop=0.5)

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = T.OPTForCausalLM(cfg).float()

        def forward(self, ids):
            return self.m(input_ids=ids, labels=ids, position_ids=torch.arange(ids.shape[1]).expand(ids.shape[0], -1)).loss
    with pytest.raises(JobError) as e:
        program.export(LM(), (torch.zeros(2, 4, dtype=torch.long),))
    said = str(e.value)
    assert "modeling_opt.py" in said and "self.layerdrop" in said and "torch.where" in said, said
    assert len(said) < 1500, said  # the first line of torch's message, not its graph dump
