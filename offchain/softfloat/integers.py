"""The integer kernels of docs/NUMERICS.md §13 on one element, with Python's exact integers:
what the referee executes at level 5 for `<op>.<dtype>` (on chain Integers.sol, same opcode
order; the numpy reference is repops/reference/integers.py, tested against this).
Words are the elements' little-endian bytes as unsigned integers (kernels.word)."""
from __future__ import annotations

from . import float32 as sf

# opcode order, shared with Integers.sol / OneStep.INT_NAMES
OPS = ("add", "sub", "mul", "div_floor", "div_trunc", "rem_floor", "rem_trunc", "and", "or", "xor", "not", "neg",
       "abs", "min", "max", "eq", "lt", "le", "select", "copy", "to_i64", "to_i32", "to_bool", "to_f32", "gather")
CODES = {"i64": 2, "bool": 3, "i32": 4, "f32": 1}   # protocol dtype codes (offchain.protocol.tensors)
WIDTH = {"i64": 64, "i32": 32}
_ARITY = {"not": 1, "neg": 1, "abs": 1, "copy": 1, "to_i64": 1, "to_i32": 1, "to_bool": 1, "to_f32": 1,
          "select": 3, "gather": 3}
_CASTS = {"to_i64": "i64", "to_i32": "i32", "to_bool": "bool", "to_f32": "f32"}


def split(name: str) -> tuple[str, str] | None:
    """'add.i64' -> ('add', 'i64'); None when `name` is not an integer kernel."""
    op, _, dt = name.rpartition(".")
    return (op, dt) if op in OPS and dt in ("i64", "i32", "bool") else None


def arity(op: str) -> int:
    return _ARITY.get(op, 2)


def operand_dtype(op: str, dt: str, i: int) -> str:
    return "bool" if (op, i) == ("select", 0) else "i64" if (op, i) == ("gather", 1) else dt


def result_dtype(op: str, dt: str) -> str:
    return "bool" if op in ("eq", "lt", "le") else _CASTS.get(op, dt)


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
    "select": lambda c, a, b: a if c else b, "copy": lambda a: a,
    **{c: (lambda a: a) for c in _CASTS},
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
