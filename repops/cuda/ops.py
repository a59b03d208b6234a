"""RepOps operations on a CUDA runtime (the GPU, or the emulator): the same functions,
launch geometry and operand handling for both, so what CI checks under emulation is what
runs on the GPU, except the runtime itself. Each function equals repops.reference bit for bit."""
from __future__ import annotations

import numpy as np

from ..reference import prims as P
from .kernels import MATMUL_TILE, THREADS

F32 = np.float32
_MAP = {"add": 0, "sub": 1, "mul": 2, "fma": 3, "div": 4, "sqrt": 5, "neg": 6, "abs": 7, "min": 8, "max": 9,
        "rint": 14, "floor": 15, "trunc": 16, "copy": 21}
_CMP = {"eq": 10, "lt": 11, "le": 12}


class Ops:
    def __init__(self, rt):
        self.rt, self.xp = rt, rt.xp

    # -- operands ----------------------------------------------------------------------------
    def _arr(self, v, dtype):
        return self.xp.asarray(v, dtype=dtype)

    def _shape(self, *vs):
        return np.broadcast_shapes(*(np.shape(v) for v in vs))

    def _operand(self, v, shape, dtype=F32):
        """(contiguous array, stride): a one-element operand is broadcast by stride 0;
        others are materialised at the output shape (an exact copy)."""
        if isinstance(v, np.ndarray) and v.size and not any(v.strides):  # a broadcast constant
            v = np.asarray(v.flat[0], v.dtype)
        v = self._arr(v, dtype)
        if v.size == 1:
            return self.xp.ascontiguousarray(v.reshape(1)), 0
        return self.xp.ascontiguousarray(self.xp.broadcast_to(v, shape)), 1

    def _grid(self, n):
        """Grid-stride kernels: any geometry gives the same bits (one output per thread)."""
        t = self.rt.elementwise_threads
        return (max(1, min(-(-n // t), self.rt.max_blocks)), 1, 1), (t, 1, 1)

    def _run(self, kernel, shape, out_dtype, pre, operands):
        """Launch an elementwise kernel: pre (leading ints), operands as (array, stride)
        pairs, then out and n."""
        out = self.xp.empty(shape, out_dtype)
        n = int(np.prod(shape)) if shape else 1
        if n:
            args = list(pre)
            for a, s in operands:
                args += [a, s]
            self.rt.launch(kernel, *self._grid(n), *args, out, n)
        return out

    # -- the primitives ----------------------------------------------------------------------
    def prim(self, name):
        if name in _MAP:
            op = _MAP[name]

            def run(*xs):
                shape = self._shape(*xs)
                ops = [self._operand(x, shape) for x in xs]
                ops += [ops[0]] * (3 - len(ops))  # unused operands: any valid pointer
                return self._run("prim_map_f32", shape, F32, [op], ops)
        elif name in _CMP:
            op = _CMP[name]

            def run(a, b):
                shape = self._shape(a, b)
                out = self._run("prim_compare_f32", shape, np.uint8, [op],
                                [self._operand(a, shape), self._operand(b, shape)])
                return out.view(np.bool_)
        elif name == "select":
            def run(c, a, b):
                shape = self._shape(c, a, b)
                cond = self._operand(self._arr(c, np.bool_).view(np.uint8), shape, np.uint8)
                return self._run("prim_select_f32", shape, F32, [], [cond, self._operand(a, shape),
                                                                       self._operand(b, shape)])
        elif name == "ldexp":
            def run(a, e):
                shape = self._shape(a, e)
                e = self.xp.clip(self._arr(e, np.int64), -400, 400).astype(np.int32)
                return self._run("prim_ldexp_f32", shape, F32, [], [self._operand(a, shape),
                                                                      self._operand(e, shape, np.int32)])
        elif name == "from_int32":
            def run(a):
                shape = np.shape(a)
                return self._run("prim_from_int32_f32", shape, F32, [], [self._operand(a, shape, np.int32)])
        elif name in ("to_int32_trunc", "to_int32_rne"):
            op = 19 if name == "to_int32_trunc" else 20

            def run(a):
                shape = np.shape(a)
                return self._run("prim_to_int32_f32", shape, np.int32, [op], [self._operand(a, shape)])
        else:
            raise KeyError(name)
        run.__name__ = name
        return run

    # -- fused kernels -------------------------------------------------------------------------
    def exp(self, x):
        x = self.xp.ascontiguousarray(self._arr(x, F32))
        out = self.xp.empty(x.shape, F32)
        if x.size:
            self.rt.launch("exp_f32", *self._grid(x.size), x, out, x.size)
        return out

    def fold(self, prim, x, axis: int, init: float, keepdims: bool = False):
        from ..reference.fold import fold as ref_fold
        code = {P.add: 0, P.max_: 1}.get(prim)
        x = self._arr(x, F32)
        if code is None or x.ndim == 0:
            return ref_fold.reference(prim, x, axis, init, keepdims)  # the primitives run here
        axis = axis % x.ndim
        moved = self.xp.ascontiguousarray(self.xp.moveaxis(x, axis, 0))  # [n, rows]: coalesced
        n = moved.shape[0]
        out = self.xp.empty(moved.shape[1:], F32)
        rows = out.size
        if n == 0:
            out.fill(init)
        elif rows:
            self.rt.launch("fold_f32", *self._grid(rows), code, moved, out, n, rows, init)
        return self.xp.expand_dims(out, axis) if keepdims else out

    def matmul(self, a, b):
        a, b = self._arr(a, F32), self._arr(b, F32)
        if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not chain")
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
        a = self.xp.ascontiguousarray(self.xp.broadcast_to(a, batch + (M, K)))
        b = self.xp.ascontiguousarray(self.xp.broadcast_to(b, batch + (K, N)))
        nb = int(np.prod(batch)) if batch else 1
        out = self.xp.empty(batch + (M, N), F32)
        if out.size == 0:
            return out
        if K == 0:
            out.fill(0.0)
            return out
        bm, bn = MATMUL_TILE
        grid = (-(-N // bn), -(-M // bm), nb)
        self.rt.launch("matmul_f32", grid, (THREADS, 1, 1), a, b, out, M, N, K)
        return out

    def table(self) -> dict:
        """The backend table (repops.backends): every primitive and fused kernel."""
        t = {name: self.prim(name) for name in list(_MAP) + list(_CMP) +
             ["select", "ldexp", "from_int32", "to_int32_trunc", "to_int32_rne"]}
        t.update(matmul=self.matmul, fold=self.fold, exp=self.exp)
        return t
