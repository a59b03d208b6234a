"""A client's own model as a Verde job: a Hugging Face GPT-2-style model (from a config, no
download) trained on a token file.

    python examples/gpt2/make_job.py OUT_DIR [--text FILE | --tokens tokens.npy]
    verde train OUT_DIR/job.yaml

Tokens are the text's bytes (vocabulary 256) cut into windows of seq + 1, or a token array
of your own (.npy, any integer dtype, 1-D). Positions and the causal mask are folded into init at
export, so every node of a step settles on chain. Dropout is 0 (RepOps has no portable random
numbers yet); attention is SDPA, which RepOps runs as one operator on every device."""
import argparse
from pathlib import Path

import torch
import torch.nn.functional as F

from offchain.protocol.dataset import read_tokens, token_windows, write_program_job
from offchain.protocol.job import JobError


class CausalLM(torch.nn.Module):
    """forward(tokens [B, seq + 1]) -> next-token cross-entropy."""

    def __init__(self, vocab: int, seq: int):
        super().__init__()
        import transformers as T
        cfg = T.GPT2Config(vocab_size=vocab, n_positions=seq, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0,
                           embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
        self.lm = T.GPT2LMHeadModel(cfg)

    def forward(self, tokens):
        logits = self.lm(input_ids=tokens[:, :-1], use_cache=False).logits
        return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--text", default=str(Path(__file__).resolve().parents[2] / "README.md"))
    p.add_argument("--tokens", help=".npy 1-D integer token ids (then --vocab)")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=4)
    a = p.parse_args()
    ids = read_tokens(a.text, a.tokens, a.vocab)
    torch.manual_seed(0)
    job = write_program_job(a.out, CausalLM(a.vocab, a.seq), {"tokens": token_windows(ids, a.seq)}, ["tokens"],
                            steps=a.steps, batch_size=a.batch_size, lr=1e-3)
    print(job)


if __name__ == "__main__":
    try:
        main()
    except JobError as e:  # what is wrong with the model or the data, said without a traceback
        raise SystemExit(f"error: {e}")
