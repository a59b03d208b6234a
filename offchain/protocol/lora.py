"""Fine-tuning as a job (the paper's LoRA runs on Llama): a pretrained model, its weights
loaded from a checkpoint file and frozen, low-rank adapters on chosen linear layers trained.
The client builds the module here and exports it like any model (write_program_job): frozen
weights become buffers of the program (program._freeze), so a step computes no gradient for
them and the optimizer keeps state for the adapters only. docs/PROTOCOL.md §5."""
from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F

from .job import JobError


class LoRALinear(torch.nn.Module):
    """y = base(x) + B(A(x)) * alpha / rank, as peft computes it (dropout 0); B starts at 0,
    so the wrapped model is the pretrained one until the first step."""

    def __init__(self, base: torch.nn.Linear, rank: int, alpha: float, generator: torch.Generator):
        super().__init__()
        self.base = base
        self.lora_a = torch.nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_b = torch.nn.Parameter(torch.zeros(base.out_features, rank))
        bound = 1 / math.sqrt(base.in_features)  # kaiming_uniform(a=sqrt(5)), as nn.Linear and peft
        with torch.no_grad():
            self.lora_a.uniform_(-bound, bound, generator=generator)
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale


def load_pretrained(model: torch.nn.Module, path) -> None:
    """The checkpoint's tensors (safetensors, by state_dict name) into `model`, all or nothing:
    a checkpoint of another model is a JobError that names what does not fit."""
    from safetensors.torch import load_file
    try:
        weights = load_file(str(path))
    except Exception as e:  # noqa: BLE001 - a missing or damaged file
        raise JobError(f"pretrained checkpoint {path}: not a readable safetensors file: {e}") from None
    own = model.state_dict()
    missing, extra = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    wrong = sorted(k for k in set(own) & set(weights) if own[k].shape != weights[k].shape or own[k].dtype != weights[k].dtype)
    if missing or extra or wrong:
        raise JobError(f"pretrained checkpoint {Path(path).name} does not fit the model: missing {missing[:5]}, "
                       f"unexpected {extra[:5]}, other shape or dtype {wrong[:5]}. Build the model with the "
                       "checkpoint's config")
    model.load_state_dict(weights)


def add_lora(model: torch.nn.Module, targets=("q_proj", "v_proj"), rank: int = 8, alpha: float = 16.0,
             seed: int = 0) -> list[str]:
    """Freezes every parameter of `model`, then wraps each nn.Linear whose name ends in one of
    `targets` with a LoRALinear; returns the wrapped layers' names."""
    for p in model.parameters():
        p.requires_grad_(False)
    g = torch.Generator().manual_seed(seed)
    wrapped = []
    for name, layer in list(model.named_modules()):
        if isinstance(layer, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets:
            parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
            setattr(parent, name.rsplit(".", 1)[-1], LoRALinear(layer, rank, alpha, g))
            wrapped.append(name)
    if not wrapped:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)})
        raise JobError(f"no nn.Linear layer is named {list(targets)}; this model's are {linear[:12]}")
    return wrapped
