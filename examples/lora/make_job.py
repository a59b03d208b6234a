"""A fine-tuning job: a pretrained Llama-style model (Hugging Face `transformers`, from a
config) loaded from a checkpoint file, frozen, with LoRA adapters on q_proj and v_proj,
trained on a token file. Only the adapters train; the frozen weights are state every step
reads (no gradient, no optimizer state).

    python examples/lora/make_job.py OUT_DIR [--base pretrained.safetensors] [--text FILE | --tokens tokens.npy]
    verde train OUT_DIR/job.yaml

--base is a safetensors checkpoint of the model below by state_dict name, e.g. the
`state.safetensors` a previous Verde job delivered (`verde fetch`; its parameter names are
the job's). Without it a randomly initialised stand-in is written to OUT_DIR/base.safetensors
first (nothing is downloaded)."""
import argparse
from pathlib import Path

import torch
import torch.nn.functional as F

from offchain.protocol.dataset import read_tokens, token_windows, write_program_job
from offchain.protocol.job import JobError
from offchain.protocol.lora import add_lora, load_pretrained


class CausalLM(torch.nn.Module):
    """forward(tokens [B, seq + 1]) -> next-token cross-entropy."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, tokens):
        logits = self.lm(input_ids=tokens[:, :-1], use_cache=False).logits
        return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())


def llama(vocab: int, seq: int):
    import transformers as T
    cfg = T.LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=seq,
                        attention_dropout=0.0, attn_implementation="sdpa")
    return T.LlamaForCausalLM(cfg)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--base", help="pretrained checkpoint (.safetensors) of the model; default: a stand-in")
    p.add_argument("--text", default=str(Path(__file__).resolve().parents[2] / "README.md"))
    p.add_argument("--tokens", help=".npy 1-D integer token ids (then --vocab)")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=4)
    a = p.parse_args()
    ids = read_tokens(a.text, a.tokens, a.vocab)
    torch.manual_seed(0)
    model = llama(a.vocab, a.seq)
    base = Path(a.base) if a.base else Path(a.out) / "base.safetensors"
    if not a.base:
        from safetensors.torch import save_file
        base.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(base))
    load_pretrained(model, base)
    wrapped = add_lora(model, rank=a.rank, alpha=a.alpha)
    job = write_program_job(a.out, CausalLM(model), {"tokens": token_windows(ids, a.seq)}, ["tokens"],
                            steps=a.steps, batch_size=a.batch_size, optimizer=dict(name="adamw", lr=1e-3,
                                                                                   weight_decay=0.0))
    print(f"LoRA (rank {a.rank}) on {len(wrapped)} layers of the checkpoint {base}")
    print(job)


if __name__ == "__main__":
    try:
        main()
    except JobError as e:  # what is wrong with the model or the data, said without a traceback
        raise SystemExit(f"error: {e}")
