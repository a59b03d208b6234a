"""Fine-tuning jobs (offchain/protocol/lora.py): a Hugging Face Llama-style model from a
pretrained checkpoint file, frozen, with LoRA adapters on q_proj and v_proj. The job trains
the adapters only (the frozen weights are state the step reads: no gradient, no optimizer
state, the same bits at the end), its graph is the honest trace and settles on chain, a
cheater at an adapter loses, and a checkpoint of another model is a JobError."""
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from offchain.dispute.context import Context
from offchain.dispute.party import InProcess, Party
from offchain.dispute.referee import dispute
from offchain.protocol.dataset import initial_state, write_program_job
from offchain.protocol.job import JobError
from offchain.protocol.jobfile import load
from offchain.protocol.lora import add_lora, load_pretrained
from offchain.protocol.trace import decode_structure
from offchain.trainer import Trainer
from offchain.trainer import adversaries as A

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "repops"))
from model_zoo import MODELS  # noqa: E402
from test_folding import WithLoss  # noqa: E402

STEPS = 3


def _pretrained(tmp_path):
    """A stand-in for a downloaded checkpoint: another instance's weights, saved."""
    model, make, loss = MODELS["hf-llama-sdpa"]()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    path = tmp_path / "pretrained.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path, make, loss


@pytest.fixture(scope="module")
def lora_job(tmp_path_factory):
    d = tmp_path_factory.mktemp("lora")
    path, make, loss = _pretrained(d)
    model, _, _ = MODELS["hf-llama-sdpa"]()
    load_pretrained(model, path)
    wrapped = add_lora(model, rank=4, alpha=8)
    tokens = torch.cat([make(0)[0], make(1)[0], make(2)[0]])
    job = load(write_program_job(d / "job", WithLoss(model, loss), {"tokens": tokens}, ["tokens"], steps=STEPS,
                                 batch_size=2, fanout=2, chunk=64, optimizer=dict(name="adamw", lr=1e-2)))
    honest = Trainer(job, d / "honest", "honest")
    honest.train()
    return job, wrapped, honest, path, d


def test_a_lora_job_trains_its_adapters_only(lora_job):
    job, wrapped, honest, path, _ = lora_job
    from safetensors.torch import load_file
    assert wrapped == [f"model.layers.{i}.self_attn.{p}" for i in range(2) for p in ("q_proj", "v_proj")]
    st = initial_state(job)
    trained = [n for n, _ in st.model.named_parameters()]
    assert sorted(trained) == sorted(f"model.{w}.lora_{ab}" for w in wrapped for ab in "ab")
    assert all(".lora_" in n for n in st.names() if n.startswith("opt."))
    pretrained = load_file(str(path))
    start, end = st.state_dict(), honest.store.load(STEPS)
    for name, value in pretrained.items():  # the frozen weights: the checkpoint's, untouched
        layer = next((w for w in wrapped if name.startswith(w + ".")), None)
        key = "buffer.model." + (name.replace(layer, layer + ".base", 1) if layer else name)
        assert torch.equal(start[key].view(torch.uint8), value.view(torch.uint8)), name
        assert torch.equal(end[key].view(torch.uint8), value.view(torch.uint8)), name
    for w in wrapped:
        b = f"model.{w}.lora_b"
        assert not start[b].any() and end[b].any(), "B starts at zero (the pretrained model) and trains"


def test_a_lora_jobs_graph_is_the_trace_and_settles_on_chain(lora_job):
    job, _, honest, _, _ = lora_job
    ctx = Context(job)
    assert [n.structure() for n in honest.step_trace(1).nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []


def test_a_cheater_at_an_adapter_loses(lora_job):
    job, _, honest, _, d = lora_job
    ctx = Context(job)
    node = next(j for j, s in enumerate(ctx.graph.structures) if decode_structure(s)[0] == "aten.mm.default")
    # the first q projection (frozen base); token 3's query (token 0's attends to itself alone: no effect)
    bad = Trainer(job, d / "cheater", "cheater", behaviour=A.CorruptValue(step=1, node=node, element=3 * 32 + 2,
                                                                          ulps=1 << 12))
    bad.train()
    v = dispute(ctx, *(Party(t.name, InProcess(t), deadline_s=120, final=t.final_claim()) for t in (bad, honest)))
    assert v.winner == "honest" and v.losers == ["cheater"] and v.node == node and v.level == 5, str(v)


def test_a_checkpoint_of_another_model_is_a_job_error(tmp_path):
    path, _, _ = _pretrained(tmp_path)
    import transformers as T
    other = T.LlamaForCausalLM(T.LlamaConfig(vocab_size=100, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=4, num_key_value_heads=2))
    with pytest.raises(JobError, match=r"does not fit the model: .*other shape or dtype \['lm_head.weight'"):
        load_pretrained(other, path)
    (tmp_path / "broken.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(JobError, match="not a readable safetensors file"):
        load_pretrained(other, tmp_path / "broken.safetensors")
    with pytest.raises(JobError, match=r"no nn.Linear layer is named \['query'\]; this model's are \[.*'q_proj'"):
        add_lora(other, targets=("query",))
