"""Random numbers inside a job (issue #39; docs/PROTOCOL.md §5, NUMERICS.md §12): a program
whose forward draws features (randint), shuffles them (randperm), torch.randn_like noise, decides per layer with torch.rand (layerdrop
written as data), drops paths (`torch.empty(..).bernoulli_`) and samples labels (multinomial, with and without replacement) is exported with the job's key, its committed graph is the honest trace, every
node settles on chain, it trains with the same bits on 1 and 2 threads, and a trainer that
flips one random bit loses at level 5, off chain and on chain. Hugging Face's layerdrop, a Python
branch on a draw, is written as data at export (one graph; OPT, BART's encoder and decoder) and
trains as a job; another model's Python branch on a draw is refused, naming the line."""
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
        h = h[:, torch.randperm(8)]  # and shuffled
        for layer in self.layers:  # layerdrop as data: one graph whatever the draw
            h = torch.where(torch.rand([]) < self.p, h, h + torch.tanh(layer(h)))
        h = h * torch.empty(h.shape[0], 1).bernoulli_(0.9)  # drop path as timm writes it (into a new tensor)
        logits = self.head(h)
        probs = torch.softmax(logits.detach(), -1)
        k = torch.multinomial(probs, 1)[:, 0]  # a sampled label (self-distillation)
        k2 = torch.multinomial(probs, 2)[:, 1]  # the second of two drawn without replacement
        ce = torch.nn.functional.cross_entropy
        return ce(logits, y) + 0.1 * ce(logits, k) + 0.05 * ce(logits, k2)


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
    # randint, randperm, randn_like, three rand([]), bernoulli_, two multinomials
    assert ops.count(DROPOUT) == 1 + 1 + 1 + 3 + 1 + 2
    assert "aten.topk.default" in ops and any(o.startswith("aten.sort") for o in ops)  # without replacement; randperm
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


class _HFLoss(torch.nn.Module):
    """A Hugging Face seq2seq or causal LM as a job's module: the batch's ids are its labels."""

    def __init__(self, model, seq2seq):
        super().__init__()
        self.m, self.seq2seq = model, seq2seq

    def forward(self, ids):
        if self.seq2seq:
            return self.m(input_ids=ids, decoder_input_ids=ids, labels=ids).loss
        return self.m(input_ids=ids, labels=ids, position_ids=torch.arange(ids.shape[1]).expand(ids.shape[0], -1)).loss


def _opt(layerdrop=0.5):
    import transformers as T
    torch.manual_seed(0)
    cfg = T.OPTConfig(vocab_size=32, hidden_size=8, num_hidden_layers=3, ffn_dim=16, num_attention_heads=2,
                      max_position_embeddings=16, word_embed_proj_dim=8, layerdrop=layerdrop, dropout=0.0)
    return _HFLoss(T.OPTForCausalLM(cfg).float(), False)


def _bart():
    import transformers as T
    torch.manual_seed(0)
    cfg = T.BartConfig(vocab_size=32, d_model=8, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                       decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, max_position_embeddings=16,
                       encoder_layerdrop=0.5, decoder_layerdrop=0.5, dropout=0.0, attention_dropout=0.0,
                       activation_dropout=0.0)
    return _HFLoss(T.BartForConditionalGeneration(cfg).float(), True)


class _AudioLoss(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(input_values=x, labels=torch.zeros(x.shape[0], dtype=torch.long)).loss


def _audio(name, layerdrop=0.5):
    """The audio encoders read `self.config.layerdrop` in their loop (HuBERT, WavLM: the latter
    never skips its first layer, which computes the position bias the others reuse)."""
    import transformers as T
    torch.manual_seed(0)
    cfg = getattr(T, f"{name}Config")(hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
                                     conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
                                     num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, mask_time_prob=0.0,
                                     num_labels=2, layerdrop=layerdrop, hidden_dropout=0.0, attention_dropout=0.0,
                                     activation_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0)
    return _AudioLoss(getattr(T, f"{name}ForSequenceClassification")(cfg).float())


_IDS = torch.randint(0, 32, (2, 6), generator=torch.Generator().manual_seed(1))
_WAVE = torch.randn(2, 200, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("make,batch,draws,skips", [
    (_opt, _IDS, 3, 3), (_bart, _IDS, 4, 4),
    (lambda: _audio("Hubert"), _WAVE, 3, 3), (lambda: _audio("WavLM"), _WAVE, 3, 2)],
    ids=["opt", "bart-encoder-decoder", "hubert-config", "wavlm-config"])
def test_hugging_face_layerdrop_exports_as_one_graph_with_each_skip_as_data(make, batch, draws, skips):
    """Hugging Face's `if torch.rand([]) < self.layerdrop: skip` in every container (OPT's decoder,
    BART's encoder and decoder), or `< self.config.layerdrop` (the audio encoders: HuBERT's failed
    export): one draw a layer and one where a layer it may skip in the program, and the user's
    module and config are left as they were."""
    import repops
    from repops.random import dropout_key
    model = make()
    ratios = lambda: [(n, m.layerdrop) for n, m in model.named_modules() if hasattr(m, "layerdrop")] + [  # noqa: E731
        (n, m.config.layerdrop) for n, m in model.named_modules() if hasattr(getattr(m, "config", None), "layerdrop")]
    hooks = lambda: {n: list(m._forward_hooks.values()) for n, m in model.named_modules()}  # noqa: E731
    model(batch)  # (transformers installs its own output-capturing hooks at the first call)
    before, hooked = ratios(), hooks()
    artifact, state, _ = program.exported(model, (batch,), seed=7)
    gm = program.load(artifact, state)
    ops = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert sum("dropout" in str(t) for t in ops) == draws, ops
    assert sum(str(t) == "aten.where.self" for t in ops) >= skips
    assert ratios() == before and all(isinstance(p, float) for _, p in before)
    assert hooks() == hooked
    # the program's step n = Hugging Face's own Python branch under RepOps with the same key, bit for bit
    for step in (1, 2, 3):
        with repops.deterministic():
            prog = gm(batch)
        with repops.deterministic(), dropout_key(7, step):
            eager = model(batch)
        assert prog.view(torch.int32).item() == eager.view(torch.int32).item(), step


@pytest.fixture(scope="module")
def layerdrop_job(tmp_path_factory):  # (its tests are in a group of their own: another worker can train it)
    d = tmp_path_factory.mktemp("layerdrop")
    g = torch.Generator().manual_seed(2)
    job_file = write_program_job(d / "job", _opt(), {"ids": torch.randint(0, 32, (16, 6), generator=g)}, ["ids"],
                                 steps=3, batch_size=4, seed=5, fanout=2, chunk=64)
    return (*trained(job_file, d), d)


@pytest.mark.xdist_group("layerdrop_job")
def test_hugging_face_opt_with_layerdrop_trains_as_a_job_and_a_flipped_skip_loses_at_level_5(layerdrop_job):
    job, ctx, honest, d = layerdrop_job
    assert ctx.kernel_graph.unsettled == []
    assert [n.structure() for n in honest.step_trace(1).nodes] == ctx.graph.structures
    # the first Philox op is the first layer's draw: its top bit flipped turns a skip into a run or back
    bad = Trainer(job, d / "flip-skip", "cheater", behaviour=A.KernelCheat(step=2, op=DROPOUT, kernel=1, element=0))
    bad.train()
    assert bad.final_claim() != honest.final_claim()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.level == 5 and "Philox" in v.reason, str(v)


def test_a_python_branch_on_a_draw_is_refused_at_export_naming_the_line_and_what_to_write():
    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

        def forward(self, x):
            if torch.rand([]) < 0.5:  # a graph per draw
                return self.a(x).sum()
            return self.b(x).sum()
    with pytest.raises(JobError) as e:
        program.export(Branchy(), (torch.zeros(2, 4),))
    said = str(e.value)
    assert "test_random_job.py" in said and "torch.rand([]) < 0.5" in said and "torch.where" in said, said
    assert len(said) < 1500, said  # the first line of torch's message, not its graph dump


def test_hugging_face_layerdrop_of_zero_exports_without_a_skip():
    """layerdrop = 0, the configs' default, still draws `torch.rand([])` and branches on it in
    Python (export refused it); it never skips: the program keeps the draw and writes no where,
    and equals Hugging Face's own branch under RepOps bit for bit."""
    import repops
    from repops.random import dropout_key
    model = _opt(layerdrop=0.0)
    ids = torch.randint(0, 32, (2, 6), generator=torch.Generator().manual_seed(1))
    artifact, state, _ = program.exported(model, (ids,), seed=7)
    gm = program.load(artifact, state)
    ops = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert "aten.where.self" not in ops, ops
    assert all(not m._forward_hooks for m in model.modules()) and model.m.model.decoder.layerdrop == 0.0
    with repops.deterministic():
        prog = gm(ids)
    with repops.deterministic(), dropout_key(7, 1):
        eager = model(ids)
    assert prog.view(torch.int32).item() == eager.view(torch.int32).item()
