"""RepOps operations on a CUDA runtime (the GPU, or the emulator): the same functions,
launch geometry and operand handling for both, so what CI checks under emulation is what
runs on the GPU, except the runtime itself. Each function equals repops.reference bit for bit.

Values reach the device only as bytes (`Runtime.upload`, a memcpy) and device arrays are
copied only as unsigned words: never through CuPy's value-based paths, which lose bits
(`cupy.asarray` of a 0-d host array is a `fill`, and `fill(v)` with v == 0 is a memset, so
-0.0 arrives as +0.0; CuPy's own kernels are compiled with -ftz=true). The emulator's
array module reproduces those traps (repops/cuda/emulator.py), so CI would see a value
slipping through them."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from ..reference import prims as P
from .kernels import matmul_geometry

F32 = np.float32
_MAP = {"add": 0, "sub": 1, "mul": 2, "fma": 3, "div": 4, "sqrt": 5, "neg": 6, "abs": 7, "min": 8, "max": 9,
        "rint": 14, "floor": 15, "trunc": 16, "copy": 21}
_CMP = {"eq": 10, "lt": 11, "le": 12}
_WORD = {1: np.uint8, 4: np.uint32, 8: np.uint64}  # same-size unsigned type: copies move bits only


class Ops:
    def __init__(self, rt):
        self.rt, self.xp = rt, rt.xp

    # -- operands ----------------------------------------------------------------------------
    def dev(self, v, dtype=F32):
        """v on the device as `dtype`. A device array stays where it is (an integer or bool
        source may be cast; a float one must already be binary32); host data is converted on
        the host (IEEE, numpy) and moved as bytes."""
        dtype = np.dtype(dtype)
        if self.rt.is_device(v):
            if v.dtype == dtype:
                return v
            if v.dtype.kind == "f" or dtype.kind == "f" and dtype != F32:
                raise DTypeError(f"CUDA backend: a {v.dtype} device array where {dtype} is needed")
            return v.astype(dtype)  # int/bool -> int/bool/float32: exact or one RNE rounding
        return self.rt.upload(np.asarray(v, dtype))

    def copy(self, v, shape=None):
        """A contiguous copy of a device array (broadcast to `shape` if given), moved as
        unsigned words of the same size."""
        w = v.view(_WORD[v.dtype.itemsize]) if v.dtype.itemsize in _WORD else v
        if shape is not None:
            w = self.xp.broadcast_to(w, shape)
        return self.xp.ascontiguousarray(w).view(v.dtype)

    def _shape(self, *vs):
        return np.broadcast_shapes(*(np.shape(v) for v in vs))

    def _operand(self, v, shape, dtype=F32):
        """(contiguous device array, stride): one value (a broadcast constant, or size 1) goes
        by stride 0; others are materialised at the output shape (an exact copy)."""
        if isinstance(v, np.ndarray) and not self.rt.is_device(v) and v.size and not any(v.strides):
            v = v.reshape(-1)[:1]  # a broadcast constant: its one element, still host bytes
        if np.size(v) == 1:
            return self.dev(v.reshape(1) if self.rt.is_device(v) else np.reshape(v, (1,)), dtype), 0
        if not self.rt.is_device(v) and tuple(np.shape(v)) != tuple(shape):
            v = np.broadcast_to(np.asarray(v, dtype), shape)  # broadcast on the host, move once
        d = self.dev(v, dtype)
        if tuple(d.shape) != tuple(shape) or not d.flags.c_contiguous:
            d = self.copy(d, shape)
        return d, 1

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

    def fill(self, shape, value):
        """A new binary32 array of `shape` with every element `value`: the copy primitive over
        a stride-0 operand (a device fill would lose -0.0)."""
        v = self._operand(np.asarray(value, F32), (1,))
        return self._run("prim_map_f32", tuple(shape), F32, [_MAP["copy"]], [v, v, v])

    def contiguous(self, v, dtype=F32):
        d = self.dev(v, dtype)
        return d if d.flags.c_contiguous else self.copy(d)

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
                c = self.dev(c, np.bool_) if self.rt.is_device(c) else np.asarray(c, np.bool_)
                cond = self._operand(c.view(np.uint8), shape, np.uint8)
                return self._run("prim_select_f32", shape, F32, [], [cond, self._operand(a, shape),
                                                                       self._operand(b, shape)])
        elif name == "ldexp":
            def run(a, e):
                shape = self._shape(a, e)
                e = self.xp.clip(self.dev(e, np.int64), -400, 400).astype(np.int32)  # integers only
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

    # -- index moves ----------------------------------------------------------------------------
    def gather(self, data, index, fill):
        r, n, d = np.shape(data)
        m = np.shape(index)[1]
        data = self.contiguous(data)
        index = self._operand(index, (r, m), np.int64)[0]
        fill = self._operand(fill, (1,))[0]
        out = self.xp.empty((r, m, d), F32)
        if out.size:
            self.rt.launch("gather_u32", *self._grid(out.size), data.view(np.uint32), index, fill.view(np.uint32),
                           out.view(np.uint32), r, n, m, d)
        return out

    def onehot(self, index, value, fill):
        rows, n = np.shape(index)[0], np.shape(fill)[0]
        index = self._operand(index, (rows,), np.int64)[0]
        value, sv = self._operand(value, (rows,))
        fill, sf = self._operand(fill, (n,))
        out = self.xp.empty((rows, n), F32)
        if out.size:
            self.rt.launch("onehot_u32", *self._grid(out.size), index, value.view(np.uint32), sv,
                           fill.view(np.uint32), sf, out.view(np.uint32), rows, n)
        return out

    # -- fused kernels -------------------------------------------------------------------------
    def exp(self, x):
        shape = tuple(np.shape(x))
        x = self._operand(x, shape)[0]  # one element: stride 0 over a 1-element array, read once
        out = self.xp.empty(shape, F32)
        if out.size:
            self.rt.launch("exp_f32", *self._grid(out.size), x, out, out.size)
        return out

    def fold(self, prim, x, axis: int, init: float, keepdims: bool = False):
        from ..reference.fold import fold as ref_fold
        code = {P.add: 0, P.max_: 1}.get(prim)
        if code is None or np.ndim(x) == 0:
            return ref_fold.reference(prim, x, axis, init, keepdims)  # the primitives run here
        x = self.dev(x)
        axis = axis % x.ndim
        moved = self.copy(self.xp.moveaxis(x, axis, 0))  # [n, rows]: coalesced
        n = moved.shape[0]
        if n == 0:
            out = self.fill(moved.shape[1:], init)
        else:
            out = self.xp.empty(moved.shape[1:], F32)
            if out.size:
                self.rt.launch("fold_f32", *self._grid(out.size), code, moved, out, n, out.size,
                               self.dev(np.asarray([init], F32)))
        return self.xp.expand_dims(out, axis) if keepdims else out

    def matmul(self, a, b):
        a, b = self.dev(a), self.dev(b)
        if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not chain")
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
        a = self.copy(a, batch + (M, K))
        b = self.copy(b, batch + (K, N))
        nb = int(np.prod(batch)) if batch else 1
        if K == 0:
            return self.fill(batch + (M, N), 0.0)  # the empty sum from acc = +0
        out = self.xp.empty(batch + (M, N), F32)
        if out.size == 0:
            return out
        bm, bn, threads = matmul_geometry(self.rt.tuning)
        grid = (-(-N // bn), -(-M // bm), nb)
        self.rt.launch("matmul_f32", grid, (threads, 1, 1), a, b, out, M, N, K)
        return out

    def table(self) -> dict:
        """The backend table (repops.backends): every primitive, index move and fused kernel."""
        t = {name: self.prim(name) for name in list(_MAP) + list(_CMP) +
             ["select", "ldexp", "from_int32", "to_int32_trunc", "to_int32_rne"]}
        t.update(matmul=self.matmul, fold=self.fold, exp=self.exp, gather=self.gather, onehot=self.onehot)
        return t
