"""Hugging Face families beyond the test zoo (tests/repops/model_zoo.py), one training step each
from a tiny config (no download), as a user would run them under RepOps:

  python benchmarks/hf_families.py [--only gemma3 mamba] [--no-emu] [--no-export]

Per family: status (ok; refused: a RepOps or Verde error naming what to change; crash: any
other error, a bug), the loss and gradients against native torch (RepOps rounds each op once in its
own fixed order: close, not equal; the largest gradient difference relative to that gradient's
own scale, gradients that are zero in exact arithmetic, ~1e-13 of rounding noise in both, left
out), the CPU backend against the emulated CUDA kernels bit for bit, and the family exported as a
job's program (program.export: torch.export and folding) stepping with the module's bits
(program_same_bits; --no-export skips it). The zoo's families go
through every protocol check in CI; these through this one step (tests/repops/test_hf_families.py).
Writes benchmarks/results/hf_families.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "hf_families.json"

_S = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
          num_key_value_heads=2, max_position_embeddings=64)
_ENC = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
# family -> (model class, config class, config): decoders train as causal LMs, encoders classify
FAMILIES = {
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(_S, head_dim=8)),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(_S, head_dim=8, attn_implementation="eager")),
    "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", dict(_S, head_dim=8, attn_implementation="eager")),
    "phi": ("PhiForCausalLM", "PhiConfig", dict(_S)),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(_S, pad_token_id=0)),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(_S, head_dim=8)),
    "olmo": ("OlmoForCausalLM", "OlmoConfig", dict(_S, pad_token_id=0)),
    "stablelm": ("StableLmForCausalLM", "StableLmConfig", dict(_S)),
    "starcoder2": ("Starcoder2ForCausalLM", "Starcoder2Config", dict(_S)),
    "cohere": ("CohereForCausalLM", "CohereConfig", dict(_S, pad_token_id=0)),
    "granite": ("GraniteForCausalLM", "GraniteConfig", dict(_S)),
    "gpt-neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(_ENC, max_position_embeddings=64)),
    "falcon": ("FalconForCausalLM", "FalconConfig", dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                                         num_attention_heads=4)),
    "bloom": ("BloomForCausalLM", "BloomConfig", dict(vocab_size=100, hidden_size=32, n_layer=2, n_head=4)),
    "gpt-j": ("GPTJForCausalLM", "GPTJConfig", dict(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                                    rotary_dim=4)),
    "gpt-bigcode": ("GPTBigCodeForCausalLM", "GPTBigCodeConfig", dict(vocab_size=100, n_embd=32, n_layer=2, n_head=4,
                                                                      n_positions=64)),
    "mpt": ("MptForCausalLM", "MptConfig", dict(vocab_size=100, d_model=32, n_layers=2, n_heads=4, max_seq_len=64)),
    "mamba": ("MambaForCausalLM", "MambaConfig", dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                                      state_size=4)),
    "electra": ("ElectraForSequenceClassification", "ElectraConfig", dict(_ENC, embedding_size=16)),
    "albert": ("AlbertForSequenceClassification", "AlbertConfig", dict(_ENC, embedding_size=16)),
    "deberta-v2": ("DebertaV2ForSequenceClassification", "DebertaV2Config", dict(_ENC)),
    "mobilebert": ("MobileBertForSequenceClassification", "MobileBertConfig",
                   dict(_ENC, embedding_size=16, intra_bottleneck_size=16)),
}
ZERO_BELOW = 1e-10  # a gradient this small everywhere is zero in exact arithmetic (a key bias under softmax)


def _model(family: str):
    import torch
    import transformers as T
    cls, cfg_name, kw = FAMILIES[family]
    torch.manual_seed(0)
    cfg = getattr(T, cfg_name)(**kw)
    for k, v in vars(cfg).items():  # dropout off as a user sets it for a deterministic step (a p > 0 is refused)
        if isinstance(v, float) and ("dropout" in k or k.endswith("_pdrop")) and k != "layerdrop":
            setattr(cfg, k, 0.0)
    model = getattr(T, cls)(cfg).float()
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    classify = "SequenceClassification" in cls
    return model, lambda m: m(input_ids=ids, labels=ids[:, 0] % 2 if classify else ids).loss, classify, ids


def _loss_module(model, classify):
    """The family as a job's module: forward(ids) returns the loss (what program.export takes)."""
    import torch

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids):
            return self.m(input_ids=ids, labels=ids[:, 0] % 2 if classify else ids).loss
    return Loss()


def _exported_same_bits(model, classify, ids) -> tuple[bool, list]:
    """The family exported as a job's program (offchain/protocol/program.py: torch.export, folding),
    loaded back and stepped under RepOps: are its loss and every gradient the module's bit for bit?
    And the hand-written backwards export let through (program.DERIVATIVE_BACKWARDS: where they
    are, autograd's derivative replaces them, equal to rounding only)."""
    import torch

    import repops
    from offchain.protocol import program
    module = _loss_module(model, classify)
    data, state = program.export(module, (ids,))
    derivatives = sorted(f"{c.__module__}.{c.__qualname__}" for c in program._applied_functions(module, (ids,)))
    prog = program.load(data, {k: v.clone() for k, v in state.items()})
    runs = []
    for m, f in ((prog, prog.loss), (module, module)):
        m.zero_grad(set_to_none=True)
        with repops.deterministic():
            out = f(ids)
            out.backward()
        runs.append((out.detach(), {k: p.grad for k, p in m.named_parameters(remove_duplicate=False)
                                    if p.grad is not None}))
    (lp, gp), (lm, gm) = runs
    same = lambda x, y: torch.equal(x.view(torch.int32), y.view(torch.int32))  # noqa: E731
    return same(lp, lm) and bool(gp) and set(gp) <= set(gm) and all(same(gp[k], gm[k]) for k in gp), derivatives


def _step(model, loss, backend):
    import contextlib

    import repops
    model.zero_grad(set_to_none=True)
    with repops.deterministic(backend) if backend else contextlib.nullcontext():
        out = loss(model)
        out.backward()
    return [out.detach().clone()] + [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]


def _ours(e: Exception) -> bool:
    """A refusal by RepOps or Verde (an error saying what to change), not a crash."""
    return type(e).__module__.split(".")[0] in ("repops", "offchain")


def _error(e: Exception) -> str:
    return f"{'' if _ours(e) else 'CRASH '}{type(e).__name__}: {str(e).splitlines()[0][:240] if str(e) else ''}"


def probe(family: str, emu: bool, export: bool = True) -> dict:
    import torch
    start = time.perf_counter()
    row = {"family": family, "model": FAMILIES[family][0]}
    try:
        model, loss, classify, ids = _model(family)
        native, cpu = _step(model, loss, None), _step(model, loss, "cpu")
        if [g is None for g in native] != [g is None for g in cpu]:
            raise AssertionError("RepOps left a different set of parameters without a gradient")
        scale = lambda t: float(t.abs().max()) if t.numel() else 0.0  # noqa: E731
        rel = [float((a - b).abs().max()) / scale(a) for a, b in zip(native, cpu)
               if a is not None and scale(a) > ZERO_BELOW]
        row.update(status="ok", loss_native=float(native[0]), loss_repops=float(cpu[0]), max_rel_diff=max(rel),
                   zero_grads=sum(a is not None and scale(a) <= ZERO_BELOW for a in native[1:]))
        if emu:
            dev = _step(model, loss, "cuda-emu")
            row["cuda_emu_same_bits"] = all(
                (a is None and b is None) or torch.equal(a.view(torch.int32), b.view(torch.int32))
                for a, b in zip(cpu, dev))
        if export:
            try:
                row["program_same_bits"], row["derivative_backwards"] = _exported_same_bits(model, classify, ids)
            except Exception as e:  # noqa: BLE001 - refused or not, the family still trains eagerly
                row["export_error"] = _error(e)
    except Exception as e:  # noqa: BLE001 - a probe: every outcome is a row
        row.update(status="refused" if _ours(e) else "crash", error=_error(e))
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=sorted(FAMILIES), default=None)
    ap.add_argument("--no-emu", action="store_true", help="skip the emulated CUDA kernels")
    ap.add_argument("--no-export", action="store_true", help="skip exporting each family as a job's program")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    import transformers
    from rich.console import Console
    from rich.table import Table
    from tqdm import tqdm
    rows = [probe(f, not args.no_emu, not args.no_export) for f in tqdm(args.only or list(FAMILIES), desc="families")]
    t = Table("family", "status", "loss native / RepOps", "max rel diff", "cpu = cuda-emu", "program = module", "s",
              "error",
              title=f"Hugging Face families beyond the zoo (transformers {transformers.__version__})")
    for r in rows:
        t.add_row(r["family"], r["status"], f"{r['loss_native']:.6f} / {r['loss_repops']:.6f}" if "loss_native" in r
                  else "", f"{r['max_rel_diff']:.1e}" if "max_rel_diff" in r else "",
                  str(r.get("cuda_emu_same_bits", "")), str(r.get("program_same_bits", "")), f"{r['seconds']:.1f}",
                  r.get("error", r.get("export_error", "")))
    Console(width=200).print(t)
    if not args.only:  # (a partial run never overwrites the committed table)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": "python benchmarks/hf_families.py",
                                        "transformers": transformers.__version__, "zero_below": ZERO_BELOW,
                                        "families": rows}, indent=1))
        print(f"wrote {args.out}")
    return 1 if any(r["status"] == "crash" or "CRASH" in r.get("export_error", "") or r.get("cuda_emu_same_bits") is False
                    or r.get("program_same_bits") is False and not r.get("derivative_backwards") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
