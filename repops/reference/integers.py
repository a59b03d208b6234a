"""Integer and boolean kernels (docs/NUMERICS.md §13) as numpy: THE reference.

Torch computes integers exactly, so training runs them natively (the same bits on every
device); these kernels are what a dispute decomposes an integer op into, so that the referee
can settle one element of one of them (offchain/softfloat/integers.py, on chain
Integers.sol). A kernel's name is `<op>.<dtype>`, dtype one of i64, i32, bool: its operands'
dtype (select's condition is bool; gather's index is i64). Every kernel computes the exact
integer result of its operands' values and wraps it into the result dtype: two's complement
for i64/i32, `!= 0` for bool. So bool add is or, bool mul is and, as in torch.
Division and remainder by 0 give 0 (the step faults before: repops/faults.py, so no step
reads one); INT_MIN / -1 wraps to INT_MIN, its remainder is 0. `fault.<dt>` is a copy whose
first nonzero element is where the step faults (docs/NUMERICS.md §14).
"""
from __future__ import annotations

import numpy as np

from . import prims as P

DTYPES = {"i64": np.dtype(np.int64), "i32": np.dtype(np.int32), "bool": np.dtype(np.bool_)}
NAMES = {v: k for k, v in DTYPES.items()}
_I64 = np.int64


def dtype_name(a) -> str | None:
    """'i64', 'i32' or 'bool' for an array (or dtype) of one of them, else None."""
    return NAMES.get(np.dtype(getattr(a, "dtype", a)))


def _wide(x):
    return np.asarray(x).astype(_I64, order="C")  # (C order: a kernel's output is row-major, as prims' are)


def _divisor(b):
    return np.where(b == 0, 1, b)


def _div_floor(a, b):
    q = np.where(b == -1, -a, np.floor_divide(a, _divisor(b)))  # x // -1 = -x (INT_MIN wraps)
    return np.where(b == 0, 0, q)


def _div_trunc(a, b):
    q = _div_floor(a, b)
    inexact = (b != 0) & (b != -1) & (np.remainder(a, _divisor(b)) != 0)
    return np.where(inexact & ((a < 0) != (b < 0)), q + 1, q)


def _rem_floor(a, b):
    return np.where((b == 0) | (b == -1), 0, np.remainder(a, _divisor(b)))


def _rem_trunc(a, b):
    return np.where((b == 0) | (b == -1), 0, np.fmod(a, _divisor(b)))


# op -> (arity, exact function on int64 arrays holding the operands' values). Order: the opcodes
# of offchain/softfloat/integers.py and Integers.sol.
OPS = {
    "add": (2, np.add), "sub": (2, np.subtract), "mul": (2, np.multiply),
    "div_floor": (2, _div_floor), "div_trunc": (2, _div_trunc),
    "rem_floor": (2, _rem_floor), "rem_trunc": (2, _rem_trunc),
    "and": (2, np.bitwise_and), "or": (2, np.bitwise_or), "xor": (2, np.bitwise_xor), "not": (1, np.invert),
    "neg": (1, np.negative), "abs": (1, np.abs), "min": (2, np.minimum), "max": (2, np.maximum),
    "eq": (2, np.equal), "lt": (2, np.less), "le": (2, np.less_equal),
    "select": (3, lambda c, a, b: np.where(c != 0, a, b)), "copy": (1, lambda a: a),
    "to_i64": (1, lambda a: a), "to_i32": (1, lambda a: a), "to_bool": (1, lambda a: a),
    "to_f32": (1, lambda a: a), "fault": (1, lambda a: a),
}
COMPARE = {"eq", "lt", "le"}
CASTS = {"to_i64": "i64", "to_i32": "i32", "to_bool": "bool", "to_f32": "f32"}


def result_dtype(op: str, dt: str) -> str:
    """The result dtype name of kernel `op.dt` ('f32' for to_f32)."""
    return "bool" if op in COMPARE else CASTS.get(op, dt)


def operand_dtype(op: str, dt: str, i: int) -> str:
    return "bool" if (op, i) == ("select", 0) else "i64" if (op, i) == ("gather", 1) else dt


def _wrap(v, rdt: str):
    if rdt == "f32":  # int64 -> binary32, nearest-even (the C conversion numpy uses, checked
        return v.astype(np.float32)  # against the soft-float's round_pack in tests)
    if rdt == "bool":
        return v != 0
    return v.astype(DTYPES[rdt])  # numpy's int64 -> int32 cast keeps the low 32 bits


def kernel(op: str, dt: str):
    """The numpy kernel of `op.dt`: operands of their dtypes (see operand_dtype) -> the result,
    recorded as one kernel of a decomposition (prims.observe)."""
    arity, f = OPS[op]
    name, rdt = f"{op}.{dt}", result_dtype(op, dt)

    def run(*operands):
        if len(operands) != arity:
            raise TypeError(f"{name} takes {arity} operands, got {len(operands)}")
        xs = [np.asarray(a) for a in operands]
        for i, x in enumerate(xs):
            if dtype_name(x) != operand_dtype(op, dt, i):
                raise TypeError(f"{name}: operand {i} is {x.dtype}, not {operand_dtype(op, dt, i)}")
        values = [_wide(x) for x in xs]
        if (op, dt) == ("not", "bool"):
            out = values[0] == 0
        else:
            with np.errstate(all="ignore"):
                out = _wrap(np.asarray(f(*values)), rdt)
        return P.record(name, tuple(operands), np.asarray(out))
    run.__name__ = name.replace(".", "_")
    return run


def gather(dt: str):
    """gather.<dt>: prims.gather's data movement (data [R, N, D], index [R, M] i64, fill 0-d)
    on integer or bool data."""
    def run(data, index, fill):
        return P.record(f"gather.{dt}", (data, index, fill), P.picked(np.asarray(data), index, fill, DTYPES[dt]))
    return run


def const(value, dt: str, shape=()) -> np.ndarray:
    """A constant operand of dtype dt: value wrapped as the dtype wraps it (a Python int)."""
    v = _wrap(np.asarray(int(value), _I64), dt) if not isinstance(value, bool) else np.asarray(value)
    return P.const(v, shape, DTYPES[dt])


KERNELS = {f"{op}.{dt}": kernel(op, dt) for op in OPS for dt in DTYPES}
KERNELS.update({f"gather.{dt}": gather(dt) for dt in DTYPES})
