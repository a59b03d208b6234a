"""MLP classifier: Linear -> GELU -> LayerNorm -> Linear -> ReLU -> Linear (logits)."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class MLPConfig:
    d_in: int = 32
    d_hidden: int = 64
    n_classes: int = 10


class MLPClassifier(nn.Module):
    def __init__(self, cfg: MLPConfig):
        super().__init__()
        self.cfg = cfg
        self.fc1 = nn.Linear(cfg.d_in, cfg.d_hidden)
        self.norm = nn.LayerNorm(cfg.d_hidden)
        self.fc2 = nn.Linear(cfg.d_hidden, cfg.d_hidden)
        self.head = nn.Linear(cfg.d_hidden, cfg.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(nn.functional.gelu(self.fc1(x)))
        return self.head(torch.relu(self.fc2(h)))

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self(x), y)
