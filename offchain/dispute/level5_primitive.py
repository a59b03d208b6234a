"""Level 5: one binary32 primitive. The disputed output element's operands are proven by
Merkle proofs against the (agreed) operand commitments, the referee executes the
primitive with the soft-float (offchain/softfloat.py; on chain Float32.sol) on their bits,
and the party whose element differs from the result loses."""
from __future__ import annotations

import numpy as np

from .. import softfloat as sf
from ..protocol.tensors import CODES, DTYPES
from .party import Party

LEVEL = 5
F32, I32, BOOL, I64 = (DTYPES[np.dtype(t)] for t in ("<f4", "<i4", bool, "<i8"))
# data movement by an integer index (repops.reference.prims.MOVEMENT): operand -> its role
INDEX_OPERAND = {"gather": 1, "onehot": 0}


def operand_code(name: str, i: int) -> int:
    """The dtype code of operand i of a primitive (the soft-float's word encoding)."""
    if (name, i) == ("select", 0):
        return BOOL
    if INDEX_OPERAND.get(name) == i:
        return I64
    return I32 if (name, i) in sf.INT32_OPERANDS else F32


def result_code(name: str) -> int:
    return BOOL if name in ("eq", "lt", "le") else I32 if name in ("to_int32_trunc", "to_int32_rne") else F32


def word(element: bytes, code: int) -> int:
    """An element's bytes (little-endian) as the primitive table's uint32 word."""
    v = int.from_bytes(element, "little", signed=CODES[code].kind == "i")
    if CODES[code].kind == "i":  # int32/int64 exponents: clamp as the reference does, then two's complement
        v = max(-400, min(400, v)) if CODES[code].itemsize == 8 else v
        return v & 0xFFFFFFFF
    return v


def operand_index(out_shape: tuple, flat: int, op_shape: tuple) -> int:
    """Broadcasting: the operand element that output element `flat` reads."""
    idx = np.unravel_index(flat, out_shape) if out_shape else ()
    idx = idx[len(idx) - len(op_shape):] if op_shape else ()
    return int(np.ravel_multi_index([0 if d == 1 else int(i) for i, d in zip(idx, op_shape)], op_shape)) if op_shape else 0


def output_shape(name: str, shapes: list) -> tuple:
    """gather: data [R, N, D], index [R, M] -> [R, M, D]; onehot: index [R], fill [N] ->
    [R, N]; a primitive: its operands broadcast."""
    if name == "gather":
        return (shapes[0][0], shapes[1][1], shapes[0][2])
    if name == "onehot":
        return (shapes[0][0], shapes[2][0])
    return tuple(np.broadcast_shapes(*shapes))


def evaluate(name: str, shapes: list, flat: int, fetch) -> tuple[int, list]:
    """Output element `flat` of a kernel from its operand elements; fetch(operand, index)
    -> (element bytes, dtype code) proves one. -> (the result's word, the words read)."""
    out = output_shape(name, shapes)
    if name in INDEX_OPERAND:
        if name == "gather":
            (r, m, d), (_, n, dd) = np.unravel_index(flat, out), shapes[0]
            e, _ = fetch(1, int(r) * shapes[1][1] + int(m))
            i = int.from_bytes(e, "little", signed=True)
            e, code = fetch(0, (int(r) * n + i) * dd + int(d)) if 0 <= i < n else fetch(2, 0)
        else:
            r, c = (int(v) for v in np.unravel_index(flat, out))
            e, _ = fetch(0, r)
            i = int.from_bytes(e, "little", signed=True)
            e, code = fetch(1, r) if i == c else fetch(2, c)
        return word(e, code), [i & 0xFFFFFFFFFFFFFFFF, word(e, code)]
    words = [word(*fetch(o, operand_index(out, flat, sh))) for o, sh in enumerate(shapes)]
    return execute(name, words), words


def execute(name: str, operand_words: list[int]) -> int:
    if name not in sf.PRIMITIVES:
        raise ValueError(f"{name!r} is not a primitive")
    opcode, arity, _ = sf.PRIMITIVES[name]
    return sf.apply(opcode, *operand_words[:arity])


def judge(name: str, result: int, operand_words: list[int], claimed: dict, parties: tuple[Party, Party],
          out_code: int):
    """-> the losers: those whose output element is not the referee's result."""
    losers = []
    for p in parties:
        if word(claimed[p.name], out_code) != result:
            p.reason = (f"{name}({', '.join(f'{w:#010x}' for w in operand_words)}) = {result:#010x} "
                        f"({'data movement' if name in INDEX_OPERAND else 'soft-float'}), it claimed {word(claimed[p.name], out_code):#010x}")
            losers.append(p)
    return losers, result
