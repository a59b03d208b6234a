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

import math
import struct

import numpy as np

from ..errors import DTypeError
from ..kernels import MAP_OPS, NORMS, ROWS
from ..reference import prims as P
from ..reference.linalg import matmul_shape
from ..reference.nn import rope_pairs
from .kernels import ADAMW_SLOTS, COLUMNS, SMS, matmul_geometry

F32 = np.float32
_CMP = {"eq", "lt", "le"}
_MAP = {name: code for name, (code, _) in MAP_OPS.items() if name not in _CMP and name != "select"}
_WORD = {1: np.uint8, 4: np.uint32, 8: np.uint64}  # same-size unsigned type: copies move bits only


RANK = 4  # dims an elementwise kernel walks its operands' strides in (kernels/common.cuh rp_coords)


def _shape_of(v) -> tuple:
    """An operand's shape: an array's own (np.shape of a device array goes through its
    __array_function__: microseconds a call, several calls an op), else numpy's (a Python
    number or list: host data)."""
    s = getattr(v, "shape", None)
    return tuple(s) if s is not None else np.shape(v)


def _elements(a) -> tuple:
    """An array's strides in elements."""
    return tuple(s // a.itemsize for s in a.strides)


def _collapse(shape, strides, rank):
    """(dims, each operand's strides) with `rank` dims, outer first, padded with inner size-1 dims:
    size-1 dims dropped, and a dim merged into the next inner one where every operand steps
    through both as one (the output, contiguous, always does). None if more than `rank` remain."""
    n, dense = 1, []
    for d in reversed(shape):  # the common case first: every operand contiguous at shape, or one value
        dense.append(n)
        n *= d
    dense = tuple(dense[::-1])
    if all(st == dense or not any(st) for st in strides):
        return (n,) + (1,) * (rank - 1), [((1 if any(st) else 0),) + (0,) * (rank - 1) for st in strides]
    dims = []  # [size, strides] inner first
    for i in reversed(range(len(shape))):
        if shape[i] == 1:
            continue
        st = [s[i] for s in strides]
        if dims and all(o == t * dims[-1][0] for o, t in zip(st, dims[-1][1])):
            dims[-1][0] *= shape[i]
        else:
            dims.append([shape[i], st])
    if len(dims) > rank:
        return None
    dims = dims[::-1] + [[1, [0] * len(strides)]] * (rank - len(dims))  # (one dim: the kernels' no-division path)
    return tuple(d for d, _ in dims), [tuple(st[k] for _, st in dims) for k in range(len(strides))]


def _broadcast(shape, strides, to) -> tuple:
    """An array's element strides read at the larger shape `to` (numpy's broadcasting: 0 along
    a new or size-1 dim), without making a broadcast view (CuPy's costs a host call per operand)."""
    lead = len(to) - len(shape)
    if lead < 0 or any(d != t and d != 1 for d, t in zip(shape, to[lead:])):
        raise ValueError(f"shape {tuple(shape)} does not broadcast to {to}")
    return (0,) * lead + tuple(s if d == t else 0 for d, s, t in zip(shape, strides, to[lead:]))


_CONSTANTS = 4096  # device constants kept per runtime (by value); beyond, the cache starts over
# Launch layouts by the operands' kernel, shapes and strides (Ops._map_fast): a pure function of
# its key, so one table serves every runtime and thread; beyond _PLANS_MAX it starts over
_PLANS: dict = {}
_PLANS_MAX = 4096

_F32 = np.dtype(F32)
_FOLDS = {P.add: 0, P.max_: 1}  # fold_f32's codes


def _plan(key, make):
    """_PLANS[key], made by make() once (False: not the plain case, the general path)."""
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        plan = _PLANS[key] = make() or False
    return plan


CHECK_BLOCKS = 128  # an index check's blocks at most (a slot each)
# constant()'s key for a list of n Python floats: their binary64 bytes (tagged by n: never the
# (dtype, shape, bytes) key of numpy data)
_DOUBLES = {n: struct.Struct(f"<{n}d") for n in range(1, 9)}


def _row_major(shape, strides, itemsize) -> bool:
    """Do byte strides walk shape in row-major order (numpy's C-contiguity: any stride on a dim of 1)?"""
    want = itemsize
    for d, st in zip(reversed(shape), reversed(strides)):
        if d != 1 and st != want:
            return False
        want *= d
    return True


class CheckSlots:
    """Device slots (int64) the checks of a block of ops write (kernels/indexing.cu
    index_check_i64, finite_check_f32), read in one download when the block settles."""

    def __init__(self, rt, size: int = 4096):
        self.rt, self.array, self.used, self.host = rt, rt.empty((size,), np.int64), 0, None
        self.kept = False  # a captured CUDA graph's: only its replays write them

    @property
    def open(self) -> bool:
        """Do they take further checks? Not once read, or kept by a graph."""
        return self.host is None and not self.kept

    def read(self) -> np.ndarray:
        if self.host is None:  # (filled no further once read: the next check takes new slots)
            from .device import stream_for
            with stream_for(self.rt.xp):  # (the stream the checks ran on)
                self.host = self.rt.download(self.array[:self.used])
        return self.host


class DeviceCheck:
    """One check's slots: first() is its first bad element (None: none), as
    repops/faults.py reads a check's flags."""

    def __init__(self, slots: CheckSlots, start: int, stop: int):
        self.slots, self.start, self.stop = slots, start, stop

    def keep(self) -> None:
        """Kept by a captured CUDA graph (repops.faults.captured): no eager check writes its slots."""
        self.slots.kept = True

    def reread(self) -> None:
        """The next first() downloads the slots again (after a CUDA graph's replay wrote them)."""
        self.slots.host = None

    def first(self) -> int | None:
        bad = self.slots.read()[self.start:self.stop]
        bad = bad[bad > 0]
        return int(bad.min()) - 1 if bad.size else None


class Ops:
    def __init__(self, rt):
        self.rt, self.xp = rt, rt.xp
        # device constants by value, kept by the runtime (an Ops is made per repops.deterministic() block)
        self._constants = rt.__dict__.setdefault("_repops_constants", {})
        self.small_below = SMS  # a product of fewer tuned tiles runs on the small ones (tests pin either)
        self._check_slots = None  # the checks' slots being filled (index_check, finite_check)
        # the matmul tiles' geometry (_matmul_tiles): the runtime's tuning is fixed
        self._tiles = tuple(matmul_geometry(rt.tuning, t) for t in ("MATMUL", "MATMUL_SMALL"))
        self._ndarray = rt.xp.ndarray  # the device's array type (CuPy's, the emulator's DeviceArray)
        self._unused_arrays = {}  # dtype -> one element a kernel is passed and never reads or writes

    def _unused(self, dtype=F32):
        """A pointer for a kernel argument its flags leave untouched (no weight, no mask, no
        second statistic, a forward norm's wterm): one element per dtype, made once."""
        a = self._unused_arrays.get(dtype)
        if a is None:
            a = self._unused_arrays[dtype] = self.rt.empty((1,), dtype)
        return a

    def new_checks(self) -> None:
        """The next index check takes new slots (repops.backends hands this Ops to a new block:
        its checks never share slots with an earlier block's, as with an Ops of its own)."""
        self._check_slots = None

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

    def constant(self, host, dtype=F32):
        """A small host constant (eps, a scale, a fill, an initial value, AdamW's scalars) on
        the device, uploaded once per value: keyed by its bytes (-0.0 and NaN payloads are
        other keys). Kernels only read it: it is never an output."""
        if dtype is F32 and type(host) is list and all(type(v) is float for v in host):
            # (the common case, eps, a scale, AdamW's scalars: Python floats, keyed by their binary64
            # bytes, which fix the binary32 values and keep -0.0 and each NaN apart, without numpy)
            key = (len(host), _DOUBLES[len(host)].pack(*host)) if len(host) in _DOUBLES else None
            d = self._constants.get(key) if key is not None else None
            if d is not None:
                return d
            host = np.asarray(host, F32)
            if key is None:
                key = (host.dtype.str, host.shape, host.tobytes())
        else:
            host = np.ascontiguousarray(np.asarray(host, dtype))
            key = (host.dtype.str, host.shape, host.tobytes())
        d = self._constants.get(key)
        if d is None:
            if len(self._constants) >= _CONSTANTS:
                self._constants.clear()
            d = self._constants[key] = self.rt.upload(host)
        return d

    def copy(self, v, shape=None):
        """A contiguous copy of a device array (broadcast to `shape` if given), moved as
        unsigned words of the same size."""
        w = v.view(_WORD[v.dtype.itemsize]) if v.dtype.itemsize in _WORD else v
        if shape is not None:
            w = self.xp.broadcast_to(w, shape)
        return self.xp.ascontiguousarray(w).view(v.dtype)

    def _shape(self, *vs):
        shapes = [_shape_of(v) for v in vs]
        if all(s == shapes[0] for s in shapes):
            return shapes[0]  # (the common case: numpy's broadcast_shapes costs microseconds)
        return np.broadcast_shapes(*shapes)

    def _operand(self, v, shape, dtype=F32):
        """(device array, its element strides at the output's `shape`): a view is read where
        it is, through its strides (0 along a broadcast dim), never copied first; host data
        moves once, at its own shape (a broadcast constant: its one element)."""
        if isinstance(v, np.ndarray) and not self.rt.is_device(v) and v.size and not any(v.strides):
            v = v.reshape(-1)[:1]  # a broadcast constant: its one element, still host bytes
        if math.prod(_shape_of(v)) == 1:
            d = self.dev(v.reshape(1), dtype) if self.rt.is_device(v) else self.constant(np.reshape(v, (1,)), dtype)
            return d, (0,) * len(shape)
        d = self.dev(v, dtype)
        return d, _broadcast(d.shape, _elements(d), tuple(shape))

    def _dense(self, v, shape, dtype=F32):
        """For kernels that index an operand flat: (its one value, stride 0), or (a contiguous
        array at `shape`, stride 1), an exact copy where it is a view."""
        d, st = self._operand(v, shape, dtype)
        if not any(st):
            return d[tuple(slice(0, 1) for _ in d.shape)].reshape(1), 0  # (a view: no copy)
        return (d if d.flags.c_contiguous and tuple(d.shape) == tuple(shape) else self.copy(d, shape)), 1

    def _grid(self, n):
        """Grid-stride kernels: any geometry gives the same bits (one output per thread)."""
        t = self.rt.elementwise_threads
        return (max(1, min(-(-n // t), self.rt.max_blocks)), 1, 1), (t, 1, 1)

    def _row_grid(self, rows, n):
        """A block per row of n elements (block-stride beyond max_blocks), a warp multiple of
        threads up to row_threads: any geometry gives the same bits (kernels/block.cuh)."""
        t = min(self.rt.row_threads, max(32, -(-n // 32) * 32))
        return (max(1, min(rows, self.rt.max_blocks)), 1, 1), (t, 1, 1)

    def _group_grid(self, n, per):
        """A block per `per` of n items (the columns of a fold or a column sum, the rows of an
        embedding table), row_threads each."""
        return (max(1, min(-(-n // per), self.rt.max_blocks)), 1, 1), (self.rt.row_threads, 1, 1)

    def _table_rows(self, v, max_blocks=None):
        """Table rows per block of embedding backward: about two blocks per SM, and no more
        groups than the runtime runs blocks (each group walks every position; on the
        emulator, 2 blocks, a group's barriers are its cost)."""
        return max(1, v // (2 * SMS), -(-v // (max_blocks or self.rt.max_blocks)))

    @staticmethod
    def _columns(n):
        """Columns per block: COLUMNS, fewer where n / COLUMNS blocks would leave SMs idle (one
        column each when n < SMS: its fold is one chain by the spec, a block is all it can use)."""
        return max(1, min(COLUMNS, n // SMS))

    def _run(self, kernel, shape, out_dtype, pre, operands):
        """Launch an elementwise kernel: pre (leading ints), operands as (array, strides)
        pairs (_operand), then out, n and the inner dims of the collapsed layout."""
        out = self.rt.empty(shape, out_dtype)
        n = math.prod(shape) if shape else 1
        if n:
            layout = _collapse(shape, [st for _, st in operands], RANK)
            if layout is None:  # more dims than the kernels walk: contiguous copies (exact) merge them all
                copied = {}
                for a, st in operands:
                    if any(st) and id(a) not in copied:
                        copied[id(a)] = (self.copy(a, shape), _elements(out))
                operands = [copied.get(id(a), (a, st)) for a, st in operands]
                layout = _collapse(shape, [st for _, st in operands], RANK)
            dims, strides = layout
            args = list(pre)
            for (a, _), st in zip(operands, strides):
                args += [a, *st]
            self.rt.launch(kernel, *self._grid(n), *args, out, n, *dims[1:])
        return out

    def fill(self, shape, value):
        """A new binary32 array of `shape` with every element `value`: the copy primitive over
        a stride-0 operand (a device fill would lose -0.0)."""
        v = self._operand(np.asarray(value, F32), tuple(shape))
        return self._run("prim_map_f32", tuple(shape), F32, [_MAP["copy"]], [v, v, v])

    def contiguous(self, v, dtype=F32):
        if type(v) is self._ndarray and v.dtype is _F32 and dtype is F32 and v.flags.c_contiguous:
            return v  # (the common case: a binary32 device array in row-major order)
        d = self.dev(v, dtype)
        return d if d.flags.c_contiguous else self.copy(d)

    def _map_plan(self, xs):
        """The launch of prim_map_f32 over binary32 device arrays xs (and host constants: one
        value), as _operand and _run decide it: (shape, n, [(one element?, strides)] for 3
        operands, the inner dims), or None where it is not that plain case (more dims than RANK
        after collapsing: copies)."""
        shape = self._shape(*xs)
        per = [(True, (0,) * len(shape)) if math.prod(x.shape) == 1 or type(x) is np.ndarray else
               (False, _broadcast(x.shape, _elements(x), tuple(shape))) for x in xs]
        per += [per[0]] * (3 - len(per))
        n = math.prod(shape) if shape else 1
        layout = _collapse(shape, [st for _, st in per], RANK) if n else ((1,) * RANK, [st for _, st in per])
        if layout is None:
            return None
        dims, strides = layout
        return tuple(shape), n, tuple((one, st) for (one, _), st in zip(per, strides)), dims[1:]

    def _map_fast(self, op, xs):
        """prim_map_f32 over binary32 device arrays (every map primitive of a step): the layout
        decided once per operand shapes and strides (_PLANS), the same launch as run's general
        path. None where an operand is anything else (host data, another dtype): that path."""
        key = [op]
        nd = self._ndarray
        for x in xs:
            if type(x) is not nd or x.dtype is not _F32:
                if type(x) is not np.ndarray or x.dtype is not _F32 or not x.size or any(x.strides):
                    return None
                key.append(None)  # (a host constant, P.const's broadcast of one value, moves as that value)
            key += (x.shape, x.strides)
        key = tuple(key)
        plan = _plan(key, lambda: self._map_plan(xs))
        if plan is False:
            return None
        shape, n, per, tail = plan
        out = self.rt.empty(shape, F32)
        if n:
            args = [op]
            for x, (one, st) in zip(xs if len(xs) == 3 else (*xs, *(xs[0],) * (3 - len(xs))), per):
                if one:  # its one value: a device array's own element, a host constant's uploaded once
                    x = x.reshape(1) if type(x) is nd else self.constant(x.reshape(-1)[:1])
                args.append(x)
                args += st
            self.rt.launch("prim_map_f32", *self._grid(n), *args, out, n, *tail)
        return out

    # -- the primitives ----------------------------------------------------------------------
    def prim(self, name):
        if name in _MAP:
            op = _MAP[name]

            def run(*xs):
                out = self._map_fast(op, xs)
                if out is not None:
                    return out
                shape = self._shape(*xs)
                ops = [self._operand(x, shape) for x in xs]
                ops += [ops[0]] * (3 - len(ops))  # unused operands: any valid pointer
                return self._run("prim_map_f32", shape, F32, [op], ops)
        elif name in _CMP:
            op = MAP_OPS[name][0]

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
                shape = _shape_of(a)
                return self._run("prim_from_int32_f32", shape, F32, [], [self._operand(a, shape, np.int32)])
        elif name in ("to_int32_trunc", "to_int32_rne"):
            op = 19 if name == "to_int32_trunc" else 20

            def run(a):
                shape = _shape_of(a)
                return self._run("prim_to_int32_f32", shape, np.int32, [op], [self._operand(a, shape)])
        else:
            raise KeyError(name)
        run.__name__ = name
        return run

    # -- index moves ----------------------------------------------------------------------------
    def gather(self, data, index, fill):
        r, n, d = _shape_of(data)
        m = _shape_of(index)[1]
        data = self.contiguous(data)
        index, si = self._dense(index, (r, m), np.int64)
        if si == 0 and r * m > 1:  # one index for every row (a broadcast): the kernel reads index[rm]
            index = self.xp.ascontiguousarray(self.xp.broadcast_to(index.reshape(1, 1), (r, m)))
        fill = self._operand(fill, (1,))[0]
        out = self.rt.empty((r, m, d), F32)
        if out.size:
            self.rt.launch("gather_u32", *self._grid(out.size), data.view(np.uint32), index, fill.view(np.uint32),
                           out.view(np.uint32), r, n, m, d)
        return out

    def onehot(self, index, value, fill):
        rows, n = _shape_of(index)[0], _shape_of(fill)[0]
        index = self._dense(index, (rows,), np.int64)[0]
        value, sv = self._dense(value, (rows,))
        fill, sf = self._dense(fill, (n,))
        out = self.rt.empty((rows, n), F32)
        if out.size:
            self.rt.launch("onehot_u32", *self._grid(out.size), index, value.view(np.uint32), sv,
                           fill.view(np.uint32), sf, out.view(np.uint32), rows, n)
        return out

    def index_check(self, i, bound: int, ignore: int | None):
        """faults.index_flags as one launch into this block's check slots (kernels/indexing.cu
        index_check_i64), read by first(): no CuPy kernels (their 3-5 elementwise ops and a
        reduction a check, from CuPy's own pool, kept a step out of a CUDA graph), no read
        until the block settles."""
        i = self.dev(i, np.int64)  # (a device array stays; host data moves once, as bytes)
        check = self._check("index_check_i64", i, bound, 0 if ignore is None else ignore, int(ignore is not None))
        return P.OVERRIDABLE["index_check"].reference(i, bound, ignore) if check is None else check

    def finite_check(self, x):
        """faults.finite_flags as one launch (kernels/indexing.cu finite_check_f32), as
        index_check: embedding backward's check, which as CuPy's comparisons kept the small
        Llama's step out of a CUDA graph."""
        x = self.dev(x)
        check = self._check("finite_check_f32", x)
        return P.OVERRIDABLE["finite_check"].reference(x) if check is None else check

    def _check(self, kernel: str, a, *rule) -> DeviceCheck | None:
        """A check kernel over the device array a (read through its strides) into this block's
        slots; None where no 4-dim walk of a exists (empty, or strides that do not collapse)."""
        walk = _collapse(a.shape, [_elements(a)], RANK) if a.size else None
        if walk is None:
            return None
        (_, d1, d2, d3), (strides,) = walk
        grid, block = self._grid(a.size)
        blocks = min(grid[0], CHECK_BLOCKS)
        slots = self._check_slots
        if slots is None or not slots.open or slots.used + blocks > slots.array.size:
            slots = self._check_slots = CheckSlots(self.rt)
        start = slots.used
        slots.used += blocks
        self.rt.launch(kernel, (blocks, 1, 1), block, a, *strides, a.size, d1, d2, d3, *rule,
                       slots.array[start:slots.used])
        return DeviceCheck(slots, start, slots.used)

    # -- random bits ------------------------------------------------------------------------------
    def philox(self, step, seed, stream, threshold):
        """Dropout's keep mask (prims.philox). The step stays where it is (a device kernel's
        0-d output: the kernel reads it, no copy back to the host); seed, stream and the
        threshold are the decomposition's host constants, passed as words. Operands that vary
        run the spec's general broadcast on the host."""
        host = [self.rt.download(a) if self.rt.is_device(a) else a for a in (seed, stream, threshold)]
        words = P.single_words(host)
        if words is None or np.size(step) != 1:
            return self.rt.upload(P.philox.reference(self.rt.download(step) if self.rt.is_device(step) else step,
                                                     *host))
        out = self.rt.empty(np.broadcast_shapes(np.shape(step), *(np.shape(a) for a in host)), np.bool_)
        if out.size:
            step = self._operand(step, (1,), np.int32)[0]
            self.rt.launch("philox_keep_u8", *self._grid(out.size), step, *words, out.view(np.uint8), out.size)
        return out

    def embedding_backward(self, index, g, num_weights):
        """kernels/indexing.cu: the poisoned columns' summary, then a block per group of table
        rows (it writes every element of them: no fill)."""
        index = self.contiguous(index, np.int64)
        g = self.contiguous(g)
        P_, D = index.size, g.shape[1]
        if num_weights == 0 or D == 0:
            return self.rt.empty((num_weights, D), F32)
        if P_ == 0:
            return self.fill((num_weights, D), 0.0)  # +0
        poison = self.rt.empty((D,), np.int64)
        cols = self._columns(D)
        self.rt.launch("embedding_poison_f32", *self._group_grid(D, cols), index, g, poison, P_, D, num_weights, cols)
        out = self.rt.empty((num_weights, D), F32)
        per = self._table_rows(num_weights)
        self.rt.launch("embedding_backward_f32", *self._group_grid(num_weights, per), index, g, poison, out, P_, D,
                       num_weights, per)
        return out

    # -- row operators, norms, attention, AdamW (kernels/nn.cu, optim.cu) ----------------------
    def _rows(self, op, x, y, dim, mask=None, scale=1.0):
        x = self.contiguous(x)
        y = None if y is None else self.contiguous(y)
        dim = dim % x.ndim if x.ndim else 0
        n = x.shape[dim] if x.ndim else 1
        outer = math.prod(x.shape[:dim]) if x.ndim else 1
        inner = math.prod(x.shape[dim + 1:]) if x.ndim else 1
        out = self.rt.empty(x.shape, F32)
        mstrides = (1, 1, 0, 0, 0, 0)
        if mask is not None:  # attention rows (the last axis): the mask read through its strides
            if inner != 1:
                raise ValueError("rows_f32 reads a mask along the last axis only")
            m = self.xp.broadcast_to(self.dev(mask, np.bool_), x.shape).view(np.uint8)
            layout = _collapse(x.shape[:-1], [_elements(m)[:-1]], 3)
            if layout is None:
                m = self.copy(m)
                layout = _collapse(x.shape[:-1], [_elements(m)[:-1]], 3)
            (_, mo1, mo2), (ms,) = layout
            mstrides = (mo1, mo2, *ms, _elements(m)[-1] if m.ndim else 0)
        else:
            m = self._unused(np.uint8)  # (has_mask 0: never read)
        if out.size:
            self.rt.launch("rows_f32", *self._row_grid(outer * inner, n), ROWS[op], x, x if y is None else y,
                           int(mask is not None), m, self.constant([scale]), out, outer, n, inner, *mstrides)
        return out

    def softmax(self, x, dim):
        return self._rows("softmax", x, None, dim)

    def log_softmax(self, x, dim):
        return self._rows("log_softmax", x, None, dim)

    def softmax_backward(self, g, y, dim):
        return self._rows("softmax_backward", g, y, dim)

    def log_softmax_backward(self, g, y, dim):
        return self._rows("log_softmax_backward", g, y, dim)

    def _norm(self, op, a, x, w, b, eps, s0, s1, n, want_dw=False, want_db=False):
        rows = a.size // n if n else 0
        out = self.rt.empty(a.shape, F32)
        # the backward kernels write wterm (the weight gradient's terms); the forward ones never touch it
        dummy = self._unused()
        wterm = self.rt.empty(a.shape, F32) if op.endswith("backward") else dummy
        if a.size:
            self.rt.launch("norm_f32", *self._row_grid(rows, n), NORMS[op], a, a if x is None else x,
                           int(w is not None), dummy if w is None else w, int(b is not None), dummy if b is None else b,
                           self.constant([eps]), s0, dummy if s1 is None else s1, out, wterm, rows, n)
        dw = self.rt.empty((n,), F32) if want_dw else None
        db = self.rt.empty((n,), F32) if want_db else None
        if (want_dw or want_db) and n:
            if rows:
                cols = self._columns(n)
                self.rt.launch("colsum_f32", *self._group_grid(n, cols), wterm, a, int(want_dw),
                               dummy if dw is None else dw, int(want_db), dummy if db is None else db, rows, n, cols)
            else:
                dw, db = (None if t is None else self.fill((n,), -0.0) for t in (dw, db))
        return out, dw, db

    def _tail(self, w, shape):
        if w is None:
            return None
        if type(w) is self._ndarray and w.dtype is _F32 and w.shape == shape and w.flags.c_contiguous:
            return w  # (copy's result: its own memory, no kernel)
        return self.copy(self.dev(w), shape)

    def layer_norm(self, x, w, b, eps, nd):
        x = self.contiguous(x)
        tail = x.shape[x.ndim - nd:]
        n = math.prod(tail)
        stat = x.shape[:x.ndim - nd] + (1,) * nd
        mean, rstd = self.rt.empty(stat, F32), self.rt.empty(stat, F32)
        y, _, _ = self._norm("layer_norm", x, None, self._tail(w, tail), self._tail(b, tail), eps, mean, rstd, n)
        return y, mean, rstd

    def layer_norm_backward(self, go, x, mean, rstd, w, nd, want_dw, want_db):
        go, x = self.contiguous(go), self.contiguous(x)
        tail = x.shape[x.ndim - nd:]
        n = math.prod(tail)
        dx, dw, db = self._norm("layer_norm_backward", go, x, self._tail(w, tail), None, 0.0, self.contiguous(mean),
                                self.contiguous(rstd), n, want_dw, want_db)
        return dx, None if dw is None else dw.reshape(tail), None if db is None else db.reshape(tail)

    def rms_norm(self, x, w, eps):
        x = self.contiguous(x)
        r = self.rt.empty(x.shape[:-1] + (1,), F32)
        y, _, _ = self._norm("rms_norm", x, None, self._tail(w, x.shape[-1:]), None, eps, r, None, x.shape[-1])
        return y, r

    def rms_norm_backward(self, g, x, w, r):
        g, x = self.contiguous(g), self.contiguous(x)
        dx, dw, _ = self._norm("rms_norm_backward", g, x, self._tail(w, x.shape[-1:]), None, 0.0,
                               self.contiguous(r), None, x.shape[-1], want_dw=True)
        return dx, dw

    def _rope(self, x, cos, sin, backward):
        """One launch over x's pairs: x read through its strides (pair i at its pair strides,
        its second lane `lane` further), cos and sin through theirs; the output contiguous."""
        x = self.dev(x)
        pairs = rope_pairs(x.shape, _shape_of(cos), _shape_of(sin))
        out = self.rt.empty(x.shape, F32)
        n = math.prod(pairs)
        if n:
            tables = [self._operand(t, pairs) for t in (cos, sin)]
            lane = _elements(x)[-1]
            layout = _collapse(pairs, [_elements(x)[:-1] + (2 * lane,), *(st for _, st in tables)], RANK)
            if layout is None:  # more dims than the kernel walks: contiguous copies (exact)
                copied = [self.copy(t, pairs) for t, _ in tables]
                x, lane, tables = self.copy(x), 1, [(t, _elements(t)) for t in copied]
                layout = _collapse(pairs, [_elements(x)[:-1] + (2,), *(st for _, st in tables)], RANK)
            dims, (sx, sc, ss) = layout
            (c, _), (s, _) = tables
            self.rt.launch("rope_f32", *self._grid(n), int(backward), x, *sx, lane, c, *sc, s, *ss, out, n, *dims[1:])
        return out

    def rope(self, x, cos, sin):
        return self._rope(x, cos, sin, False)

    def rope_backward(self, g, cos, sin):
        return self._rope(g, cos, sin, True)

    def attention(self, q, k, v, mask, scale, bias=None):
        if bias is not None:  # the reference's kernels, each on this device
            from ..reference.nn import attention as ref
            return ref.reference(q, k, v, mask, scale, bias)
        q, k, v = self.dev(q), self.dev(k), self.dev(v)
        p = self._rows("attention_rows", self.matmul(q, self.xp.swapaxes(k, -1, -2)), None, -1, mask, scale)
        return self.matmul(p, v), p

    def attention_backward(self, g, q, k, v, p, mask, scale):
        g, q, k, v, p = (self.dev(t) for t in (g, q, k, v, p))
        sw = lambda t: self.xp.swapaxes(t, -1, -2)  # noqa: E731
        dv = self.matmul(sw(p), g)
        ds = self._rows("attention_rows_backward", self.matmul(g, sw(v)), p, -1, mask, scale)
        return self.matmul(ds, k), self.matmul(sw(ds), q), dv

    def adamw(self, p, g, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay):
        """In place on device arrays (the tensors of repops.ops.adamw_), returned as the new
        values; host arrays are moved first."""
        p, m, v, b1t, b2t = (self.contiguous(t) for t in (p, m, v, b1t, b2t))
        g = self.contiguous(g)
        c = self.constant([1.0 - lr * weight_decay, 1.0 - beta1, beta2, 1.0 - beta2, beta1, lr, eps])
        scal = self.rt.empty((2,), F32)
        self.rt.launch("adamw_scalars", (1, 1, 1), (1, 1, 1), b1t, b2t, c, scal)
        if p.size:
            self.rt.launch("adamw_f32", *self._grid(p.size), p, g, m, v, c, scal, p.size)
        return p, m, v, b1t, b2t

    def adamw_foreach(self, ps, gs, ms, vs, b1ts, b2ts, lr, beta1, beta2, eps, weight_decay):
        """A group's parameters in two launches per ADAMW_SLOTS of them (their pointers are
        kernel arguments), each parameter's bits adamw's; returned as adamw's, per parameter."""
        ps, ms, vs, b1ts, b2ts, gs = ([self.contiguous(t) for t in ts] for ts in (ps, ms, vs, b1ts, b2ts, gs))
        c = self.constant([1.0 - lr * weight_decay, 1.0 - beta1, beta2, 1.0 - beta2, beta1, lr, eps])
        for lo in range(0, len(ps), ADAMW_SLOTS):
            group = range(lo, min(len(ps), lo + ADAMW_SLOTS))
            unused = ADAMW_SLOTS - len(group)  # padded with the first's pointers: never touched
            scal = self.rt.empty((2 * len(group),), F32)
            self.rt.launch("adamw_foreach_scalars", (1, 1, 1), (1, 1, 1), c, scal, len(group),
                           *(t for i in group for t in (b1ts[i], b2ts[i])), *(b1ts[lo], b2ts[lo]) * unused)
            (blocks, _, _), block = self._grid(max(ps[i].size for i in group))
            self.rt.launch("adamw_foreach_f32", (blocks, len(group), 1), block, c, scal,
                           *(t for i in group for t in (ps[i], gs[i], ms[i], vs[i], ps[i].size)),
                           *(ps[lo], gs[lo], ms[lo], vs[lo], 0) * unused)
        return tuple(zip(ps, ms, vs, b1ts, b2ts))

    def fold(self, prim, x, axis: int, init: float, keepdims: bool = False):
        from ..reference.fold import fold as ref_fold
        code = _FOLDS.get(prim)
        if code is None or not _shape_of(x):
            return ref_fold.reference(prim, x, axis, init, keepdims)  # the primitives run here
        x = self.dev(x)
        axis = axis % x.ndim
        shape = (x.shape[axis], *x.shape[:axis], *x.shape[axis + 1:])  # [n, rows]: coalesced
        strides = (x.strides[axis], *x.strides[:axis], *x.strides[axis + 1:])
        if math.prod(shape) and _row_major(shape, strides, x.itemsize):
            moved = x  # (x's memory is the moved array's, row-major: what the copy below gives, no calls)
        else:
            moved = self.copy(self.xp.moveaxis(x, axis, 0))
            shape = tuple(moved.shape)
        n = shape[0]
        if n == 0:
            out = self.fill(shape[1:], init)
        else:
            out = self.rt.empty(shape[1:], F32)
            if out.size:
                cols = self._columns(out.size)
                self.rt.launch("fold_f32", *self._group_grid(out.size, cols), code, moved, out, n, out.size,
                               self.constant([init]), cols)
        return self.xp.expand_dims(out, axis) if keepdims else out

    def matmul_add(self, a, b, c):
        """add(matmul(a, b), c) in one launch: c read through its strides in the product's
        epilogue (a bias that broadcasts the product to a larger shape: two kernels)."""
        a, b = self.dev(a), self.dev(b)
        batch, M, _, N = matmul_shape(a.shape, b.shape)
        shape = batch + (M, N)
        try:
            fits = np.broadcast_shapes(tuple(getattr(c, "shape", ())), shape) == shape
        except ValueError:  # (the add refuses it, as the spec's does)
            fits = False
        return self.matmul(a, b, bias=c) if fits else self.prim("add")(self.matmul(a, b), c)

    def _matmul_fast(self, a, b, bias):
        """matmul's launch where a, b (and the bias) are binary32 device arrays whose batch
        collapses without copies: its arguments decided once per shapes and strides (_PLANS),
        the same launch as the general path (a broadcast view has its array's pointer: the
        kernel reads both through the strides passed). None: not that case, the general path."""
        nd = self._ndarray
        if type(a) is not nd or type(b) is not nd or a.dtype is not _F32 or b.dtype is not _F32:
            return None
        if bias is None:
            bkey = None
        elif type(bias) is nd and bias.dtype is _F32:
            bkey = (bias.shape, bias.strides)
        else:
            return None
        key = ("matmul", a.shape, a.strides, b.shape, b.strides, bkey, self.small_below, self._tiles)
        plan = _plan(key, lambda: self._matmul_plan(a, b, bias))
        if plan is False:
            return None
        shape, kernel, grid, block, mid, one, tail = plan
        out = self.rt.empty(shape, F32)
        d = out if bias is None else (bias.reshape(1) if one else bias)
        self.rt.launch(kernel, grid, block, a, b, out, *mid, d, *tail)
        return out

    def _matmul_plan(self, a, b, bias):
        """(out shape, kernel, grid, block, the scalars between out and the bias, bias of one
        element?, the scalars after it) as matmul's general path computes them; None where that
        path does more than one launch over the operands as they are (K = 0, an empty output,
        a batch that needs copies)."""
        batch, M, K, N = matmul_shape(a.shape, b.shape)
        shape = batch + (M, N)
        if K == 0 or math.prod(shape) == 0:
            return None
        ea, eb = _elements(a), _elements(b)
        if a.shape != batch + (M, K):  # (as the general path's broadcast view: 0 along every dim of size 1)
            ea = tuple(0 if d == 1 else s for d, s in zip(batch + (M, K), _broadcast(a.shape, ea, batch + (M, K))))
        if b.shape != batch + (K, N):
            eb = tuple(0 if d == 1 else s for d, s in zip(batch + (K, N), _broadcast(b.shape, eb, batch + (K, N))))
        one = bias is not None and math.prod(bias.shape) == 1
        if bias is None or one:
            sds = (0,) * len(shape)
        else:
            sds = _broadcast(bias.shape, _elements(bias), shape)
        layout = _collapse(batch, [ea[:-2], eb[:-2], sds[:-2]], 2)
        if layout is None:
            return None
        (nb0, nb1), (sab, sbb, sdb) = layout
        kernel, (grid, threads) = self._matmul_tiles(M, N, nb0 * nb1)
        return (shape, kernel, grid, (threads, 1, 1), (M, N, K, *ea[-2:], *eb[-2:], nb1, *sab, *sbb), one,
                (int(bias is not None), *sds[-2:], *sdb))

    def matmul(self, a, b, bias=None):
        """Operands read through their strides (a transposed weight, a head-split view, a
        broadcast batch); the batch collapsed to two dims, else copied contiguous (exact)."""
        out = self._matmul_fast(a, b, bias)
        if out is not None:
            return out
        a, b = self.dev(a), self.dev(b)
        batch, M, K, N = matmul_shape(a.shape, b.shape)
        if K == 0:
            out = self.fill(batch + (M, N), 0.0)  # the empty sum from acc = +0
            return out if bias is None else self.prim("add")(out, bias)
        out = self.rt.empty(batch + (M, N), F32)
        if out.size == 0:
            return out
        if a.shape != batch + (M, K):
            a = self.xp.broadcast_to(a, batch + (M, K))
        if b.shape != batch + (K, N):
            b = self.xp.broadcast_to(b, batch + (K, N))
        # the bias through its strides at the output's shape (out itself, never read, without one)
        d, sds = (out, (0,) * out.ndim) if bias is None else self._operand(bias, out.shape)
        layout = _collapse(batch, [_elements(a)[:-2], _elements(b)[:-2], sds[:-2]], 2)
        if layout is None:
            a, b = self.copy(a), self.copy(b)
            if any(sds[:-2]):
                d = self.copy(d, out.shape)
                sds = _elements(d)
            layout = _collapse(batch, [_elements(a)[:-2], _elements(b)[:-2], sds[:-2]], 2)
        (nb0, nb1), (sab, sbb, sdb) = layout
        sa, sb, sd = _elements(a)[-2:], _elements(b)[-2:], sds[-2:]
        kernel, (grid, threads) = self._matmul_tiles(M, N, nb0 * nb1)
        self.rt.launch(kernel, grid, (threads, 1, 1), a, b, out, M, N, K, *sa, *sb, nb1, *sab, *sbb,
                       d, int(bias is not None), *sd, *sdb)
        return out

    def _matmul_tiles(self, M, N, batch):
        """(kernel, (grid, threads)): the tuned tiles, or the small ones where the tuned would
        leave SMs idle (a tile never changes the bits: only which block computes an output)."""
        (bm, bn, threads), (sm, sn, small) = self._tiles
        if -(-N // bn) * -(-M // bm) * batch < self.small_below and sm * sn < bm * bn:
            return "matmul_small_f32", ((-(-N // sn), -(-M // sm), batch), small)
        return "matmul_f32", ((-(-N // bn), -(-M // bm), batch), threads)

    def table(self) -> dict:
        """The backend table (repops.backends): every primitive, index move and fused kernel."""
        t = {name: self.prim(name) for name in list(MAP_OPS) + ["ldexp", "from_int32", "to_int32_trunc", "to_int32_rne"]}
        t.update({name: getattr(self, name) for name in (
            "matmul", "matmul_add", "fold", "gather", "onehot", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
            "layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward", "rope", "rope_backward", "attention",
            "attention_backward", "adamw", "adamw_foreach", "embedding_backward", "philox", "index_check",
            "finite_check")})
        return t
