"""The rounding log's storage (the paper's "efficient encoding", §5.5): three symbols per
element packed five to a byte (3^5 = 243 <= 256: 1.6 bits per entry, against log2(3) = 1.58),
then zlib for what runs of `ignore` leave to compress."""
from __future__ import annotations

import zlib

import numpy as np

_POW = np.array([1, 3, 9, 27, 81], np.uint16)


def pack(codes: np.ndarray) -> bytes:
    """uint8 codes in {0, 1, 2} -> ceil(n / 5) bytes (the count is kept by the caller)."""
    c = np.asarray(codes, np.uint8).ravel()
    if c.size and c.max() > 2:
        raise ValueError("rounding codes are 0, 1 or 2")
    pad = (-c.size) % 5
    c = np.concatenate([c, np.ones(pad, np.uint8)]).reshape(-1, 5).astype(np.uint16)
    return (c @ _POW).astype(np.uint8).tobytes()


def unpack(data: bytes, n: int) -> np.ndarray:
    b = np.frombuffer(data, np.uint8).astype(np.uint16)
    if b.size != -(-n // 5) or (b.size and b.max() > 242):
        raise ValueError(f"{len(data)} bytes are not a packed log of {n} entries")
    out = (b[:, None] // _POW[None, :]) % 3
    return out.ravel()[:n].astype(np.uint8)


def compress(data: bytes) -> bytes:
    return zlib.compress(data, 9)
