"""The small MLP job the protocol and on-chain tests play on (one definition)."""
import torch

from offchain.protocol.dataset import write_job

STEPS, FANOUT = 6, 3


def mlp_data(n=64, d=16, classes=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    return {"x": x, "y": (x @ torch.randn(d, classes, generator=g)).argmax(1)}


def write_small_job(directory):
    return write_job(directory, "mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, mlp_data(), steps=STEPS,
                     batch_size=8, fanout=FANOUT, chunk=64)
