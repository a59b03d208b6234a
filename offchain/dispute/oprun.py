"""One operator of a trace, re-run in decomposed form (levels 3-5): each party and the
referee rebuild the aten call from the node's structure and its (agreed) input tensors,
run the RepOps reference under prims.observe(), and describe every primitive kernel:

  kernel leaf = leaf(0x08 || u32 len name || name || u16 #operands
                     || per operand: descriptor || commitment  || output commitment)

An operand descriptor says where the operand's elements come from, without values:
  0x00 VIEW  u16 source || i64 offset || u8 ndim || per dim: u64 size, i64 stride
             (source: 0..m-1 the op's inputs, m + k the output of kernel k; element
             idx of the operand is element offset + sum idx_d * stride_d of the source,
             in the source's row-major order)
  0x01 CONST u8 dtype || u8 ndim || dims || the value's bytes (every element equal)
  0x02 MAT   (computed by data movement the reference does not expose as a view)
The last leaf is the pseudo-kernel "result" whose operands are the op's outputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

import repops

from ..protocol import merkle
from ..protocol.encoding import decode
from ..protocol.tensors import CODES, DTYPES, canonical, commit
from ..protocol.trace import decode_structure

VIEW, CONST, MAT = 0, 1, 2
KERNEL = b"\x08"
RESULT = "result"


def aten_op(name: str):
    """'aten.mm.default' -> torch.ops.aten.mm.default (only aten ops can be named)."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        raise ValueError(f"not an aten op name: {name!r}")
    return getattr(getattr(torch.ops.aten, parts[1]), parts[2])


@dataclass
class Kernel:
    name: str
    descriptors: list            # bytes per operand
    operands: list               # commitments per operand
    output: bytes                # commitment (ZERO for the result pseudo-kernel)
    arrays: list = field(default_factory=list, repr=False)   # operand arrays (values, kept on demand)
    out_array: object = field(default=None, repr=False)

    def encode(self) -> bytes:
        b = self.name.encode()
        return (KERNEL + len(b).to_bytes(4, "big") + b + len(self.operands).to_bytes(2, "big") +
                b"".join(d + c for d, c in zip(self.descriptors, self.operands)) + self.output)

    def leaf(self) -> bytes:
        return merkle.leaf_hash(self.encode())


class _Sources:
    """Arrays an operand may be a view of: the op's inputs, then every kernel output."""

    def __init__(self):
        self.arrays = []

    def add(self, a: np.ndarray):
        self.arrays.append(a)

    def describe(self, a) -> bytes:
        """By layout only, never by values: a view of a source, else a constant if it is one
        value broadcast (0-d, or every stride 0: repops.reference.prims.const), else MAT."""
        a = np.asarray(a)
        found = self._find(a)
        if found is None and a.size and (a.ndim == 0 or not any(a.strides)):
            one = np.ascontiguousarray(a.reshape(-1)[:1]) if a.ndim == 0 else np.asarray(a.flat[0], a.dtype).reshape(1)
            c = canonical(one)
            return (bytes([CONST, DTYPES[c.dtype], a.ndim]) + b"".join(d.to_bytes(8, "big") for d in a.shape) +
                    c.tobytes())
        if found is None:
            return bytes([MAT])
        src, offset = found
        strides = [s // a.itemsize for s in a.strides]
        return (bytes([VIEW]) + src.to_bytes(2, "big") + offset.to_bytes(8, "big", signed=True) + bytes([a.ndim]) +
                b"".join(d.to_bytes(8, "big") + s.to_bytes(8, "big", signed=True) for d, s in zip(a.shape, strides)))

    def _find(self, a):
        if a.size == 0:
            return None
        lo = hi = a.__array_interface__["data"][0]
        for d, s in zip(a.shape, a.strides):
            (lo, hi) = (lo, hi + (d - 1) * s) if s >= 0 else (lo + (d - 1) * s, hi)
        hi += a.itemsize
        for i in range(len(self.arrays) - 1, -1, -1):
            src = self.arrays[i]
            if src.dtype != a.dtype or not src.flags.c_contiguous or src.size == 0:
                continue
            base = src.__array_interface__["data"][0]
            if base <= lo and hi <= base + src.nbytes and (a.__array_interface__["data"][0] - base) % a.itemsize == 0:
                return i, (a.__array_interface__["data"][0] - base) // a.itemsize
        return None


class OpRun:
    """structure: the node's structure bytes; inputs: its input tensors (any layout)."""

    def __init__(self, structure: bytes, inputs: list, chunk: int):
        self.op_name, attrs, self.refs = decode_structure(structure)
        self.func = aten_op(self.op_name)
        self.inputs = [t.detach().cpu().contiguous().clone() for t in inputs]
        self.attrs, self.chunk = attrs, chunk

    def call(self, inputs):
        args, kwargs = decode(self.attrs, inputs)
        return self.func(*args, **kwargs)

    def kernels(self, keep: int | None = None, commit_all: bool = True, tamper=None, tamper_after=None) -> list[Kernel]:
        """The decomposition's kernels and the result pseudo-kernel. keep: index of a kernel
        whose operand and output arrays are kept (levels 4-5). tamper(k, output array) and
        tamper_after (the same, once kernel k is committed): a dishonest party's hooks
        (offchain.adversaries), never used by an honest one."""
        src = _Sources()
        inputs = [t.clone() for t in self.inputs]  # fresh each run: an in-place op mutates them
        for t in inputs:
            src.add(t.numpy())
        out: list[Kernel] = []

        def seen(name, args, result):
            k = len(out)
            if tamper is not None:
                tamper(k, result)
            arrays = [np.asarray(a) for a in args]
            desc = [src.describe(a) for a in arrays]
            res = np.asarray(result)
            kern = Kernel(name, desc, [commit(a, self.chunk) for a in arrays] if commit_all else [],
                          commit(res, self.chunk) if commit_all else merkle.ZERO)
            if keep == k:
                kern.arrays = [np.array(a, copy=True) for a in arrays]
                kern.out_array = np.array(res, copy=True)
            out.append(kern)
            src.add(res if res.flags.c_contiguous else np.ascontiguousarray(res))
            if tamper_after is not None:
                tamper_after(k, result)
        from repops.reference.prims import observe
        with observe(seen), repops.deterministic("reference"):
            result = self.call(inputs)
        results = result if isinstance(result, (list, tuple)) else [result]
        results = [r for r in results if isinstance(r, torch.Tensor)]
        arrays = [r.detach().numpy() for r in results]
        desc = []
        for r, a in zip(results, arrays):
            d = src.describe(a)
            desc.append(d)
        final = Kernel(RESULT, desc, [commit(r, self.chunk) for r in results], merkle.ZERO)
        if keep == len(out):
            final.arrays = [np.array(a, copy=True) for a in arrays]
        out.append(final)
        self.results = results
        return out


def decode_kernel(enc: bytes) -> tuple[str, list, list, bytes]:
    """Kernel encoding -> (name, operand descriptors, operand commitments, output commitment)."""
    if enc[:1] != KERNEL:
        raise ValueError("not a kernel encoding (tag)")
    n = int.from_bytes(enc[1:5], "big")
    name = enc[5:5 + n].decode()
    o = 5 + n
    nops = int.from_bytes(enc[o:o + 2], "big")
    o += 2
    descs, comms = [], []
    for _ in range(nops):
        kind = enc[o]
        if kind == VIEW:
            size = 12 + 16 * enc[o + 11]
        elif kind == CONST:
            size = 3 + 8 * enc[o + 2] + CODES[enc[o + 1]].itemsize
        else:
            size = 1
        descs.append(enc[o:o + size])
        comms.append(enc[o + size:o + size + 32])
        o += size + 32
    if len(enc) != o + 32:
        raise ValueError("kernel encoding has the wrong length")
    return name, descs, comms, enc[o:o + 32]


def element_of(descriptor: bytes, index: int, shape: tuple):
    """For operand element `index` (flat, row-major, of an operand of `shape`): ('view',
    source, source flat index) or ('const', value bytes) or ('mat',)."""
    kind = descriptor[0]
    if kind == CONST:
        ndim = descriptor[2]
        return ("const", descriptor[3 + 8 * ndim:])
    if kind == MAT:
        return ("mat",)
    source = int.from_bytes(descriptor[1:3], "big")
    offset = int.from_bytes(descriptor[3:11], "big", signed=True)
    ndim = descriptor[11]
    dims = [(int.from_bytes(descriptor[12 + 16 * i:20 + 16 * i], "big"),
             int.from_bytes(descriptor[20 + 16 * i:28 + 16 * i], "big", signed=True)) for i in range(ndim)]
    idx = np.unravel_index(index, [d for d, _ in dims]) if dims else ()
    return ("view", source, offset + sum(int(i) * s for i, (_, s) in zip(idx, dims)))


def operand_shape(descriptor: bytes):
    kind = descriptor[0]
    if kind == CONST:
        ndim = descriptor[2]
        return tuple(int.from_bytes(descriptor[3 + 8 * i:11 + 8 * i], "big") for i in range(ndim))
    if kind == VIEW:
        ndim = descriptor[11]
        return tuple(int.from_bytes(descriptor[12 + 16 * i:20 + 16 * i], "big") for i in range(ndim))
    return None

