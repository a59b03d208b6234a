"""A Hugging Face mixture-of-experts model as a Verde job (docs/NUMERICS.md §8, "Mixture of
experts"): a tiny Mixtral on its default experts path ("grouped_mm": sort of expert ids,
histc, cumsum, grouped matmuls) is written with write_program_job, its committed graph is
the honest trace, every node (repops::grouped_mm, histc, the integer sort) settles on chain,
and a trainer that routes one token to another expert inside a grouped matmul (one integer
kernel element off, every other level consistent) loses the dispute at level 5, off chain
in either seat and on chain, where the honest trainer is paid. A Qwen2-MoE job with the
router's auxiliary loss (bincount) and a Mixtral job on the "batched_mm" experts path settle
every node too; the experts' eager path (a Python loop over the experts hit) is
refused at export naming the path to use."""
import pytest
import torch

from offchain.dispute.context import Context
from offchain.protocol.dataset import write_program_job
from offchain.protocol.job import JobError
from offchain.protocol.jobfile import load
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A
from playing import honest_paid_on_chain, honest_wins_off_chain

GROUPED = "repops.grouped_mm.default"
B = 4


class MoE(torch.nn.Module):
    """A tiny causal-LM MoE as a job's model: forward(ids) returns the loss."""

    def __init__(self, family="mixtral", experts="grouped_mm"):
        super().__init__()
        import transformers as T
        torch.manual_seed(0)
        kw = dict(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=4,
                  num_key_value_heads=2, num_experts_per_tok=2, max_position_embeddings=32,
                  experts_implementation=experts)
        if family.endswith("+aux"):  # the router's load-balancing loss (torch.bincount of expert ids)
            family, kw = family[:-4], {**kw, "output_router_logits": True, "router_aux_loss_coef": 0.1}
        self.model = T.MixtralForCausalLM(T.MixtralConfig(num_local_experts=4, **kw)) if family == "mixtral" else \
            T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(num_experts=4, moe_intermediate_size=8,
                                                   shared_expert_intermediate_size=16, **kw))

    def forward(self, ids):
        return self.model(input_ids=ids, labels=ids).loss


def _data():
    return {"ids": torch.randint(0, 50, (2 * B, 6), generator=torch.Generator().manual_seed(0))}


def _job(d, family="mixtral", experts="grouped_mm"):
    return load(write_program_job(d, MoE(family, experts), _data(), ["ids"], steps=2, batch_size=B, fanout=2))


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    """The Mixtral job, its referee context and an honest trainer that trained it."""
    d = tmp_path_factory.mktemp("moe")
    job = _job(d / "job")
    honest = Trainer(job, d / "honest", "honest")
    honest.train()
    return job, Context(job), honest, d


def _grouped_node(ctx):
    return next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == GROUPED)


def _routing_kernel(rows=2 * B * 6, hidden=16, experts=4, out=48):
    """The index, in repops::grouped_mm's decomposition (the reference's kernels, as a dispute
    sees them) of the kernel whose output is each routed row's group: the last to_i64.i32
    before the weight copy, the matmul's fmas and the gather of each row's own expert."""
    import repops
    from repops.reference.prims import observe
    names = []
    offs = torch.arange(1, experts + 1, dtype=torch.int32) * (rows // experts)
    with observe(lambda name, a, o: names.append(name)), repops.deterministic("reference"):
        torch.ops.repops.grouped_mm(torch.ones(rows, hidden), torch.ones(experts, hidden, out), offs)
    return max(i for i, n in enumerate(names[:names.index("copy")]) if n == "to_i64.i32")


def _route_flipper(job, d, name, element):
    """Inside step 1's first grouped matmul (the experts' gate/up projection: 48 (token,
    expert) rows, hidden 16, 4 experts, 48 outputs), the group of one routed row is one higher
    (the integer kernel _routing_kernel): that row takes the next expert's product. The rest of
    the op is computed from it: consistent at every level but that one integer step."""
    bad = Trainer(job, d / name, "cheater",
                  behaviour=A.KernelCheat(step=1, op=GROUPED, kernel=_routing_kernel(), element=element))
    bad.train()
    return bad


@pytest.mark.xdist_group("moe_job")
def test_a_mixtral_job_is_its_trace_and_every_node_settles_on_chain(moe):
    job, ctx, honest, d = moe
    traced = honest.step_trace(1)
    assert [n.structure() for n in traced.nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []
    ops = [n.op for n in traced.nodes]
    assert ops.count(GROUPED) == 2 + 4 and {"aten.histc.default", "aten.sort.default", "aten.topk.default"} <= set(ops)
    assert Trainer(job, d / "two", "two").train() == honest.final_claim()


@pytest.mark.xdist_group("moe_job")
def test_a_trainer_that_reroutes_a_token_in_a_grouped_matmul_loses_at_level_5(moe):
    job, ctx, honest, d = moe
    bad = _route_flipper(job, d, "flip", element=5)
    assert bad.final_claim() != honest.final_claim()
    for v in honest_wins_off_chain(ctx, honest, bad):
        assert v.node == _grouped_node(ctx) and v.level == 5 and v.reason.startswith("to_i64.i32("), str(v)


@pytest.mark.xdist_group("moe_job")
def test_the_rerouting_trainer_loses_on_chain_and_the_honest_trainer_is_paid(settle_match, moe):
    job, ctx, honest, d = moe
    honest_paid_on_chain(settle_match, job, ctx, _route_flipper(job, d, "flip-chain", element=9), honest, level=5)


@pytest.mark.parametrize("family,experts,op", [("qwen2-moe+aux", "grouped_mm", GROUPED),
                                               ("mixtral", "batched_mm", "aten.bmm.default")])
def test_a_qwen2_moe_job_with_the_routers_loss_and_a_batched_experts_job_settle_every_node(tmp_path, family, experts,
                                                                                           op):
    job = _job(tmp_path / "job", family, experts)
    ctx = Context(job)
    assert ctx.kernel_graph.unsettled == []
    assert op in {decode_structure(s)[0] for s in ctx.graph.structures}


def test_the_eager_experts_loop_is_refused_at_export_naming_the_grouped_path(tmp_path):
    with pytest.raises(JobError, match=r'set_experts_implementation\("grouped_mm"\)'):
        _job(tmp_path / "job", "mixtral", "eager")
    assert not (tmp_path / "job").exists()
