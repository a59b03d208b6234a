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


def decode(data: bytes, tensors: list | None = None):
    """Inverse of value(): tensors come back from `tensors` by input index; a device
    attribute decodes to None (the caller's device applies). -> (value, bytes used)."""
    import torch

    def read(o):
        tag = data[o]
        o += 1
        if tag == NONE or tag == DEVICE:
            return None, o
        if tag in (FALSE, TRUE):
            return tag == TRUE, o
        if tag == INT:
            return int.from_bytes(data[o:o + 8], "big", signed=True), o + 8
        if tag == FLOAT:
            return struct.unpack(">d", data[o:o + 8])[0], o + 8
        if tag in (STR, DTYPE, ENUM):
            n = int.from_bytes(data[o:o + 4], "big")
            s = data[o + 4:o + 4 + n].decode("utf-8")
            o += 4 + n
            if tag == DTYPE:
                return getattr(torch, s.split(".", 1)[1]), o
            if tag == ENUM:
                return getattr(torch, s.split(".", 1)[1]), o
            return s, o
        if tag == LIST:
            n = int.from_bytes(data[o:o + 4], "big")
            o += 4
            out = []
            for _ in range(n):
                v, o = read(o)
                out.append(v)
            return out, o
        if tag == DICT:
            n = int.from_bytes(data[o:o + 4], "big")
            o += 4
            out = {}
            for _ in range(n):
                k = int.from_bytes(data[o:o + 4], "big")
                key = data[o + 4:o + 4 + k].decode("utf-8")
                v, o = read(o + 4 + k)
                out[key] = v
            return out, o
        if tag == TENSOR:
            i = int.from_bytes(data[o:o + 2], "big")
            if tensors is None or i >= len(tensors):
                raise EncodingError(f"attribute names input tensor {i}, which was not given")
            return tensors[i], o + 2
        raise EncodingError(f"unknown attribute tag {tag:#x}")
    try:
        v, used = read(0)
    except (IndexError, UnicodeDecodeError, AttributeError) as e:
        raise EncodingError(f"malformed attribute encoding: {e}") from None
    if used != len(data):
        raise EncodingError(f"{len(data) - used} trailing bytes after the attribute encoding")
    return v
