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
