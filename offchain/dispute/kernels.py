"""A kernel of an operator's decomposition as every level sees it: the dtype code of each
operand and of the output, the output's shape, which operand element an output element
reads (broadcasting), and an element's word for the soft-float. Shared by levels 3-5 and
the chain client; no level owns it."""
from __future__ import annotations

import numpy as np

from ..protocol.tensors import CODES, DTYPES
from ..softfloat import float32 as sf
from ..softfloat import integers as si

F32, I32, BOOL, I64 = (DTYPES[np.dtype(t)] for t in ("<f4", "<i4", bool, "<i8"))
# data movement by an integer index (repops.reference.prims.MOVEMENT, and gather of integer data):
# kernel -> the index operand
INDEX_OPERAND = {"gather": 1, "onehot": 0, **{f"gather.{dt}": 1 for dt in si.DTYPES}}


# counter-based random bits (repops.reference.prims.philox): int32 words in, bool out, and
# output element i's value depends on i itself (the element's counter)
RANDOM = {"philox"}


def operand_code(name: str, i: int) -> int:
    """The dtype code of operand i of a kernel (the soft-float's word encoding)."""
    if ints := si.split(name):
        return si.CODES[si.operand_dtype(*ints, i)]
    if name in RANDOM:
        return I32
    if (name, i) == ("select", 0):
        return BOOL
    if INDEX_OPERAND.get(name) == i:
        return I64
    return I32 if (name, i) in sf.INT32_OPERANDS else F32


def result_code(name: str) -> int:
    if ints := si.split(name):
        return si.CODES[si.result_dtype(*ints)]
    return BOOL if name in ("eq", "lt", "le") or name in RANDOM else I32 if name in ("to_int32_trunc", "to_int32_rne") else F32


def word(element: bytes, code: int) -> int:
    """An element's bytes (little-endian) as an unsigned word: what the chain compares
    (Tensors.word) and the integer kernels read."""
    return int.from_bytes(element, "little")


def primitive_word(element: bytes, code: int) -> int:
    """An operand element as the binary32 primitive table's uint32 word: an int64 (an
    exponent) clamped to [-400, 400] as the reference does, then two's complement."""
    if CODES[code].kind == "i":
        v = int.from_bytes(element, "little", signed=True)
        return (max(-400, min(400, v)) if CODES[code].itemsize == 8 else v) & 0xFFFFFFFF
    return word(element, code)


def operand_index(out_shape: tuple, flat: int, op_shape: tuple) -> int:
    """Broadcasting: the operand element that output element `flat` reads."""
    idx = np.unravel_index(flat, out_shape) if out_shape else ()
    idx = idx[len(idx) - len(op_shape):] if op_shape else ()
    return int(np.ravel_multi_index([0 if d == 1 else int(i) for i, d in zip(idx, op_shape)], op_shape)) if op_shape else 0


def output_shape(name: str, shapes: list) -> tuple:
    """gather: data [R, N, D], index [R, M] -> [R, M, D]; onehot: index [R], fill [N] ->
    [R, N]; a primitive and philox: their operands broadcast."""
    if name in INDEX_OPERAND and name != "onehot":  # a gather
        return (shapes[0][0], shapes[1][1], shapes[0][2])
    if name == "onehot":
        return (shapes[0][0], shapes[2][0])
    return tuple(np.broadcast_shapes(*shapes))
