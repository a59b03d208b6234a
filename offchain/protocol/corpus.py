"""Real text for the Llama-style jobs, shipped with the repository (its own documentation),
as byte-level tokens: rows of seq + 1 consecutive bytes (vocab 256). Nothing downloaded."""
from __future__ import annotations

from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ("docs/NUMERICS.md", "docs/PROTOCOL.md", "README.md")


def text() -> bytes:
    return b"\n".join((ROOT / t).read_bytes() for t in TEXTS if (ROOT / t).exists())


def token_rows(seq: int, rows: int | None = None, source: bytes | None = None) -> torch.Tensor:
    """int64 [n, seq + 1]: non-overlapping windows of the text's bytes."""
    data = torch.frombuffer(bytearray(source if source is not None else text()), dtype=torch.uint8).to(torch.int64)
    n = data.numel() // (seq + 1)
    if rows is not None:
        n = min(n, rows)
    if n == 0:
        raise ValueError(f"the text is shorter than one row of {seq + 1} tokens")
    return data[: n * (seq + 1)].reshape(n, seq + 1).clone()


# The Llama-style model of the demo and the protocol benchmarks (vocab: bytes).
TEXT_LLAMA = {"vocab": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 192, "max_seq": 32}


def text_job(directory, steps: int, fanout: int = 4, chunk: int = 256, batch_size: int = 4):
    """Write the text job (TEXT_LLAMA on the repository's text) and return its job file."""
    from .dataset import write_job
    return write_job(directory, "llama", TEXT_LLAMA, {"tokens": token_rows(TEXT_LLAMA["max_seq"])}, steps=steps,
                     batch_size=batch_size, fanout=fanout, chunk=chunk)
