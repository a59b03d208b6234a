"""The integer kernels of docs/NUMERICS.md §13 on one element, with Python's exact integers:
what the referee executes at level 5 for `<op>.<dtype>` (on chain Integers.sol, same opcode
order; the numpy reference is repops/reference/integers.py, tested against this).
Words are the elements' little-endian bytes as unsigned integers (kernels.word)."""
from __future__ import annotations

import numpy as np

from repops.reference import integers as reference

from ..protocol.tensors import DTYPES as DTYPE_CODES
from . import float32 as sf

# the names, arities and dtypes are the reference's (one statement); opcode order = OPS order,
# shared with Integers.sol / OneStep.INT_NAMES. Only the arithmetic below is restated.
OPS = (*reference.OPS, "gather")
DTYPES = tuple(reference.DTYPES)
CODES = {n: DTYPE_CODES[d] for n, d in (*reference.DTYPES.items(), ("f32", np.dtype("<f4")))}  # the protocol's
WIDTH = {"i64": 64, "i32": 32}
operand_dtype, result_dtype = reference.operand_dtype, reference.result_dtype


def split(name: str) -> tuple[str, str] | None:
    """'add.i64' -> ('add', 'i64'); None when `name` is not an integer kernel."""
    op, _, dt = name.rpartition(".")
    return (op, dt) if op in OPS and dt in DTYPES else None


def arity(op: str) -> int:
    return 3 if op == "gather" else reference.OPS[op][0]


def value(word: int, dt: str) -> int:
    """An element's word as its value (bool: any nonzero byte is true)."""
    if dt == "bool":
        return int(word != 0)
    w = WIDTH[dt]
    word &= (1 << w) - 1
    return word - (1 << w) if word >> (w - 1) else word


def pack(v: int, dt: str) -> int:
    """An exact integer as the result word of dtype dt: wrapped (two's complement), `!= 0`
    for bool, nearest-even binary32 for f32."""
    if dt == "f32":
        return sf.round_pack(int(v < 0), abs(v), 0)
    if dt == "bool":
        return int(v != 0)
    return v & ((1 << WIDTH[dt]) - 1)


def _div_trunc(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_EXACT = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div_floor": lambda a, b: a // b if b else 0, "div_trunc": lambda a, b: _div_trunc(a, b) if b else 0,
    "rem_floor": lambda a, b: a % b if b else 0, "rem_trunc": lambda a, b: a - b * _div_trunc(a, b) if b else 0,
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "not": lambda a: ~a,
    "neg": lambda a: -a, "abs": abs, "min": min, "max": max,
    "eq": lambda a, b: int(a == b), "lt": lambda a, b: int(a < b), "le": lambda a, b: int(a <= b),
    "select": lambda c, a, b: a if c else b, "copy": lambda a: a, "fault": lambda a: a,
    **{c: (lambda a: a) for c in reference.CASTS},
}


def apply(name: str, words: list[int]) -> int:
    """Kernel `name` (not gather: a data movement, level 5 proves what it picks) on its
    operands' words -> the result word."""
    op, dt = split(name) or (None, None)
    if op is None or op == "gather":
        raise ValueError(f"{name!r} is not an integer kernel")
    vals = [value(w, operand_dtype(op, dt, i)) for i, w in enumerate(words[:arity(op)])]
    v = 1 - vals[0] if (op, dt) == ("not", "bool") else _EXACT[op](*vals)
    return pack(v, result_dtype(op, dt))
