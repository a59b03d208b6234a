"""Canonical bytes of everything Verde hashes (docs/PROTOCOL.md §1): one encoder, so two
honest parties always hash the same object to the same bytes."""
from __future__ import annotations

import struct

NONE, FALSE, TRUE, INT, FLOAT, STR, LIST, TENSOR, DTYPE, DEVICE, ENUM, DICT = range(12)


class EncodingError(ValueError):
    """A value the canonical encoding does not define."""


def u8(v: int) -> bytes:
    return v.to_bytes(1, "big")


def u16(v: int) -> bytes:
    return v.to_bytes(2, "big")


def u32(v: int) -> bytes:
    return v.to_bytes(4, "big")


def u64(v: int) -> bytes:
    return v.to_bytes(8, "big")


def string(s: str) -> bytes:
    b = s.encode("utf-8")
    return u32(len(b)) + b


def value(v, tensor_slot=None) -> bytes:
    """Tagged encoding of an op attribute. tensor_slot(t) -> the tensor's input index
    (tensors are inputs, referenced by position, never encoded by value here)."""
    import torch
    if v is None:
        return u8(NONE)
    if v is True or v is False:
        return u8(TRUE if v else FALSE)
    if isinstance(v, int):
        if not -(1 << 63) <= v < (1 << 63):
            raise EncodingError(f"integer attribute {v} does not fit in 64 bits")
        return u8(INT) + v.to_bytes(8, "big", signed=True)
    if isinstance(v, float):
        return u8(FLOAT) + struct.pack(">d", v)
    if isinstance(v, str):
        return u8(STR) + string(v)
    if isinstance(v, torch.Tensor):
        if tensor_slot is None:
            raise EncodingError("a tensor inside an attribute with no input slot")
        return u8(TENSOR) + u16(tensor_slot(v))
    if isinstance(v, (list, tuple)):  # torch.Size included
        return u8(LIST) + u32(len(v)) + b"".join(value(x, tensor_slot) for x in v)
    if isinstance(v, dict):
        items = sorted(v.items())
        return u8(DICT) + u32(len(items)) + b"".join(string(k) + value(x, tensor_slot) for k, x in items)
    if isinstance(v, torch.dtype):
        return u8(DTYPE) + string(str(v))
    if isinstance(v, torch.device):
        return u8(DEVICE)  # where an op runs never changes RepOps' bits: not part of the graph
    if isinstance(v, (torch.memory_format, torch.layout)):
        return u8(ENUM) + string(str(v))
    raise EncodingError(f"no canonical encoding for an attribute of type {type(v).__name__}: {v!r}")
