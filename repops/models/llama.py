"""Llama-style decoder: token embedding, RMSNorm, rotary attention (causal softmax),
SwiGLU MLP, bias-free linears, LM head, cross-entropy."""
from dataclasses import dataclass

import torch
from torch import nn

from ..ops import attention, rms_norm, rope


@dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 256
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 192
    max_seq: int = 64
    rope_base: float = 10000.0
    eps: float = 1e-5


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        """x * rsqrt(mean(x^2) + eps) * weight, as one RepOps op (same bits as the composition)."""
        return rms_norm(x, self.weight, self.eps)


def rope_tables(cfg: LlamaConfig):
    """cos/sin tables, a function of the config only. Built under RepOps (its exp, log, sin,
    cos), not libm: every party derives the same bits. inv_freq_i = exp(-(2i/hd) log base)."""
    import repops
    hd = cfg.d_model // cfg.n_heads
    with repops.deterministic():
        i2 = torch.arange(0, hd, 2, dtype=torch.float32)            # exact small integers
        inv = torch.exp(-(i2 / hd) * torch.log(torch.full((), cfg.rope_base)))
        ang = torch.arange(cfg.max_seq, dtype=torch.float32)[:, None] * inv[None, :]
        return torch.cos(ang), torch.sin(ang)


def apply_rope(x, cos, sin):
    """Interleaved pairs rotated, as one op (same bits as the composition it replaces)."""
    return rope(x, cos, sin)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.h, self.hd = cfg.n_heads, cfg.d_model // cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, self.hd).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q, k = apply_rope(q, cos[:T], sin[:T]), apply_rope(k, cos[:T], sin[:T])
        o = attention(q, k, v, mask[:T, :T], self.hd ** -0.5)  # softmax(q k^T / sqrt(hd), causal) v
        return self.out(o.transpose(1, 2).reshape(B, T, D))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.n1, self.n2 = RMSNorm(cfg.d_model, cfg.eps), RMSNorm(cfg.d_model, cfg.eps)
        self.attn = Attention(cfg)
        self.gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.n1(x), cos, sin, mask)
        h = self.n2(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class LlamaLM(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.eps)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        cos, sin = rope_tables(cfg)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.triu(torch.ones(cfg.max_seq, cfg.max_seq, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x, self.cos, self.sin, self.mask)
        return self.head(self.norm(x))

    def loss(self, tokens):
        logits = self(tokens[:, :-1])
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
