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
  0x03 CAT   u8 axis || CONST background (the operand's full shape) || u16 #pieces ||
             per piece: u64 start || u64 step || u64 width || VIEW or CONST descriptor
             (position i along axis is piece p's element (i - start) / step when
             start <= i, step divides i - start and the quotient is < width; the first
             such piece counts, else the background: what stack, cat, slice_backward
             return, described from the op's meaning rather than memory layout)
The last leaf is the pseudo-kernel "result" whose operands are the op's outputs.
A kernel's structure, what the job commits per node for the on-chain level 3, leaves the
values' commitments out:
  kernel structure = 0x09 || u32 len name || name || u16 #operands || descriptors
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field

import numpy as np
import torch

import repops

from repops.reference.prims import placement

from ..protocol import merkle
from ..protocol.encoding import decode
from ..protocol.tensors import CODES, DTYPES, canonical, commit
from ..protocol.trace import EMPTY, decode_structure, output_tensors

VIEW, CONST, MAT, CAT = 0, 1, 2, 3
KERNEL, STRUCTURE, FAULT_OUTPUT = b"\x08", b"\x09", b"\x0e"
RESULT = "result"
FAULT_KERNEL = "fault.bool"  # repops.faults: where a step can fault


def _map_kernels() -> dict:
    """The CPU backend's map primitives (each one primitive, the reference's bits: tests/repops
    compare them) to compute the observed steps; none where its C library cannot be built (the
    reference's numpy computes them: the same bits, slower). VERDE_LEVEL3_KERNELS=0: none, and
    each accumulator hashed again (the reference run tests/protocol/test_level3_kernels.py
    compares with)."""
    import os
    return {} if os.environ.get("VERDE_LEVEL3_KERNELS", "1") == "0" else _compiled_maps()


@functools.cache
def _compiled_maps() -> dict:
    from repops.reference.prims import MAP_PRIMITIVES
    try:
        from repops.cpu.elementwise import table
        compiled = table()
    except Exception:  # noqa: BLE001 - no compiler: the reference's numpy
        return {}
    # (primitives only: the table's fused operators would hide their steps from observe)
    return {n: k for n, k in compiled.items() if n in MAP_PRIMITIVES}


def fault_output(element: int) -> bytes:
    """The output commitment of the faulting kernel in a fault claim's decomposition: the
    kernel faults at `element` (docs/PROTOCOL.md §7). Never a tensor commitment (tag 0x03)."""
    return merkle.sha256(FAULT_OUTPUT, element.to_bytes(8, "big"))


def aten_op(name: str):
    """'aten.mm.default' -> torch.ops.aten.mm.default; RepOps' own ops ('repops.attention.default',
    repops/ops.py) too. Nothing else can be named."""
    import repops.ops  # noqa: F401  (defines torch.ops.repops.*)
    parts = name.split(".")
    if len(parts) != 3 or parts[0] not in ("aten", "repops"):
        raise ValueError(f"not an aten or repops op name: {name!r}")
    return getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])


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

    def structure(self) -> bytes:
        b = self.name.encode()
        return STRUCTURE + len(b).to_bytes(4, "big") + b + len(self.descriptors).to_bytes(2, "big") + \
            b"".join(self.descriptors)


def view(source: int, offset: int, shape, strides) -> bytes:
    return (bytes([VIEW]) + source.to_bytes(2, "big") + offset.to_bytes(8, "big", signed=True) + bytes([len(shape)]) +
            b"".join(int(d).to_bytes(8, "big") + int(s).to_bytes(8, "big", signed=True) for d, s in zip(shape, strides)))


def constant(value: np.ndarray, shape) -> bytes:
    c = canonical(np.asarray(value).reshape(1))
    return bytes([CONST, DTYPES[c.dtype], len(shape)]) + b"".join(int(d).to_bytes(8, "big") for d in shape) + c.tobytes()


def row_major(shape) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.insert(0, acc)
        acc *= int(d)
    return strides


def cat(axis: int, shape, pieces: list[tuple[int, int, int, bytes]], background=0.0) -> bytes:
    """pieces: (start, step, width, descriptor) along axis of an operand of `shape`; a Python
    background is binary32, a numpy one keeps its dtype (an integer tensor's padding)."""
    bg = background if isinstance(background, np.generic) else np.float32(background)
    return (bytes([CAT, axis]) + constant(bg, shape) + len(pieces).to_bytes(2, "big") +
            b"".join(a.to_bytes(8, "big") + b.to_bytes(8, "big") + w.to_bytes(8, "big") + d for a, b, w, d in pieces))


def _whole(t, src, insert=None):
    """A whole input as a VIEW, optionally with a size-1 axis inserted (stride 0)."""
    shape, strides = list(t.shape), row_major(t.shape)
    if insert is not None:
        shape.insert(insert, 1)
        strides.insert(insert, 0)
    return view(src(t), 0, shape, strides)


def _stack(args, src, result=None):
    ts, dim = args[0], (args[1] if len(args) > 1 else 0)
    shape = list(ts[0].shape)
    dim = dim + len(shape) + 1 if dim < 0 else dim
    out = shape[:dim] + [len(ts)] + shape[dim:]
    return cat(dim, out, [(i, 1, 1, _whole(t, src, dim)) for i, t in enumerate(ts)])


def _cat(args, src, result=None):
    ts = [t for t in args[0] if t.numel()]
    dim = args[1] if len(args) > 1 else 0
    dim = dim + ts[0].dim() if dim < 0 else dim
    out, pieces, at = list(ts[0].shape), [], 0
    for t in ts:
        pieces.append((at, 1, t.shape[dim], _whole(t, src)))
        at += t.shape[dim]
    out[dim] = at
    return cat(dim, out, pieces)


def _slice_backward(args, src, result=None):
    grad, sizes, dim, start, _, step = args
    dim = dim + len(sizes) if dim < 0 else dim
    start = max(0, min(start + sizes[dim] if start < 0 else start, sizes[dim]))
    return cat(dim, list(sizes), [(start, step, grad.shape[dim], _whole(grad, src))])


def _select_backward(args, src, result=None):
    grad, sizes, dim, index = args
    dim = dim + len(sizes) if dim < 0 else dim
    index = index + sizes[dim] if index < 0 else index
    return cat(dim, list(sizes), [(index, 1, 1, _whole(grad, src, dim))])


def _constant_pad(args, src, result=None):
    """An integer tensor padded along one axis (positive amounts): what Hugging Face's
    causal-LM loss does to its labels. Float padding is placed by prims.pad already."""
    x, pad, value = (list(args) + [0])[:3]
    padded = [(x.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2) if pad[2 * i] or pad[2 * i + 1]]
    if len(padded) != 1 or min(padded[0][1:]) < 0:
        return None
    axis, lo, hi = padded[0]
    shape = list(x.shape)
    shape[axis] += lo + hi
    return cat(axis, shape, [(lo, 1, x.shape[axis], _whole(x, src))], np.asarray(value).astype(_np_dtype(x))[()])


def _copy_of_input(args, src, result=None):
    t = args[0]
    return view(src(t), 0, t.shape, row_major(t.shape))


def _copy_into(args, src, result=None):
    """copy_(dst, source): dst's elements are source's, broadcast (a size-1 or missing axis
    reads with stride 0); a dtype conversion is not a view (MAT)."""
    dst, source = args[0], args[1]
    if source.dtype != dst.dtype:
        return None
    shape = list(dst.shape)
    strides = [0] * (len(shape) - source.dim()) + [s if d != 1 else 0
                                                    for d, s in zip(source.shape, row_major(source.shape))]
    return view(src(source), 0, shape, strides)


def _fill_from(args, src, result=None):
    """fill.Tensor(dst, value): the 0-d value at every position (a VIEW with strides 0)."""
    dst, value = args[0], args[1]
    if value.dtype != dst.dtype:
        return None
    return view(src(value), 0, dst.shape, [0] * dst.dim())


def _slice_scatter(args, src, result=None):
    """slice_scatter(x, v, dim, start, end, step): v's slices at start, start + step, ...
    along dim, x's elsewhere (a CAT whose second piece is all of x)."""
    x, v = args[0], args[1]
    dim, start, end, step = (list(args[2:]) + [0, None, None, 1][len(args) - 2:])[:4]
    dim %= x.dim()
    first = range(x.shape[dim])[slice(start, end, step)]
    if v.dtype != x.dtype or not len(first):
        return None
    return cat(dim, list(x.shape), [(first.start, step, len(first), _whole(v, src)), (0, 1, x.shape[dim], _whole(x, src))],
               _np_dtype(x).type(0))


def _select_scatter(args, src, result=None):
    x, v, dim, index = args[:4]
    dim %= x.dim()
    if v.dtype != x.dtype:
        return None
    return cat(dim, list(x.shape), [(index % x.shape[dim], 1, 1, _whole(v, src, dim)), (0, 1, x.shape[dim], _whole(x, src))],
               _np_dtype(x).type(0))


def _np_dtype(t):
    return np.dtype(np.bool_) if t.dtype == torch.bool else np.dtype(str(t.dtype).removeprefix("torch."))


def _filled(args, src, result=None):
    """fill_(dst, value) / zero_(dst): one constant at dst's shape."""
    dst = args[0]
    v = args[1] if len(args) > 1 else 0
    return constant(np.asarray(float(v), np.float32) if dst.dtype == torch.float32 else np.asarray(v), dst.shape)


def _creation(shape_arg: int, value: float | None = None, value_arg: int | None = None):
    """zeros/ones/full and their *_like / new_* forms: one constant at the result's shape and
    dtype; the value is `value`, or argument `value_arg`; the shape is argument `shape_arg` (a
    size list, or a tensor whose shape the result takes)."""
    def rule(args, src, result):
        v = value if value_arg is None else args[value_arg]
        return constant(np.asarray(v).astype(result.numpy().dtype), list(result.shape))
    return rule


# Exact ops whose results are fresh arrays: their elements' sources, from what the op means.
RESULT_RULES = {
    "aten.clone.default": _copy_of_input, "aten.contiguous.default": _copy_of_input,
    "aten.stack.default": _stack, "aten.cat.default": _cat, "aten.slice_backward.default": _slice_backward,
    "aten.select_backward.default": _select_backward, "aten.constant_pad_nd.default": _constant_pad, "aten.lift_fresh_copy.default": _copy_of_input,
    "aten.zeros.default": _creation(0, 0.0), "aten.ones.default": _creation(0, 1.0),
    "aten.full.default": _creation(0, value_arg=1), "aten.zeros_like.default": _creation(0, 0.0),
    "aten.ones_like.default": _creation(0, 1.0), "aten.full_like.default": _creation(0, value_arg=1),
    "aten.new_zeros.default": _creation(1, 0.0), "aten.new_ones.default": _creation(1, 1.0),
    "aten.new_full.default": _creation(1, value_arg=2),
    # functional writes (a program functionalised at export: T5's label shift)
    "aten.copy.default": _copy_into, "aten.fill.Tensor": _fill_from, "aten.fill.Scalar": _filled,
    "aten.slice_scatter.default": _slice_scatter, "aten.select_scatter.default": _select_scatter,
    # RepOps zeroes what torch leaves uninitialised (repops.aten.EMPTY)
    **{f"aten.{n}": _creation(0, 0.0) for n in ("empty_like.default", "empty.memory_format", "new_empty.default",
                                                "new_empty_strided.default", "empty_strided.default",
                                                "empty_permuted.default")},
}
# Exact in-place ops: the result is the mutated input's memory, but its values come from
# elsewhere (never describe it as a view of the pre-op input).
INPLACE_RULES = {"aten.copy_.default": _copy_into, "aten.fill_.Scalar": _filled, "aten.zero_.default": _filled}


_DEAD = np.empty(0, np.uint8)  # a source given back (_Sources.sweep): it holds no element any more
_SWEEP_ADDS, _SWEEP_BYTES = 64, 1 << 28  # sweep after this many sources (or the live count), or bytes


class _Sources:
    """Arrays an operand may be a view of: the op's inputs, then every kernel output."""

    def __init__(self):
        self.arrays = []
        self._by_root: dict = {}  # root key (_key) -> the sources over its memory
        self._borrowed: list[tuple] = []  # (start, end, root key) of sources over borrowed memory
        self._aliased: set = set()  # roots whose memory a source of another root also covers
        self._owning: list[int] = []  # live sources that own their memory: the only ones ever given back
        self._adds, self._bytes, self._live = 0, 0, 0  # since the last sweep; the sources it left

    @staticmethod
    def _root(a):
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a

    @classmethod
    def _key(cls, a, r=None):
        """Which memory a source is over (r: a's root, if known): its root array where that owns
        it, else (memory borrowed from a torch tensor, whose every .numpy() is a new array
        object) the memory's extent, so the op's own reads of an input find the input without
        a scan of every source."""
        r = cls._root(a) if r is None else r
        return id(r) if r.flags.owndata else (r.__array_interface__["data"][0], r.nbytes)

    def add(self, a: np.ndarray):
        """Two sources of different roots overlap only if one of them borrows its memory (a
        tensor's; an in-place op's written tensor): numpy's own allocations are disjoint while
        alive. So a borrowing source is checked against all, any other against the borrowers."""
        self.arrays.append(a)
        r = self._root(a)
        root = self._key(a, r)
        self._by_root.setdefault(root, []).append(len(self.arrays) - 1)
        if not a.size:
            return
        start = a.__array_interface__["data"][0]
        span = (start, start + a.nbytes, root)
        borrowing = not r.flags.owndata
        others = ((o.__array_interface__["data"][0], o.__array_interface__["data"][0] + o.nbytes, self._key(o))
                  for o in self.arrays[:-1] if o.size) if borrowing else self._borrowed
        for s0, e0, r0 in others:
            if r0 != root and s0 < span[1] and start < e0:
                self._aliased.update((r0, root))
        if borrowing:
            self._borrowed.append(span)
        if a.flags.owndata:
            self._owning.append(len(self.arrays) - 1)
        self._adds, self._bytes = self._adds + 1, self._bytes + a.nbytes
        if self._adds >= max(_SWEEP_ADDS, self._live) or self._bytes >= _SWEEP_BYTES:  # (amortised: linear)
            self.sweep()

    def sweep(self):
        """Give back the memory of the sources nothing else holds. No array, view or variable
        reaches such a source, so no later operand can lie in its memory, and the search (the
        latest source that holds an operand) names what it would name with it kept: the same
        descriptors (tested), deterministically (a reference count, never an address). Without
        it a matmul keeps all K of its [M, N] accumulators: 200 GB at a 125 M model's output layer."""
        self._adds = self._bytes = 0
        live = []
        for i in self._owning:
            if sys.getrefcount(self.arrays[i]) <= 2:  # (the list's reference, and the call's)
                self.arrays[i] = _DEAD
            else:
                live.append(i)
        self._owning, self._live = live, len(live)

    def describe(self, a) -> bytes:
        """By layout only, never by values: a view of a source, else a constant if it is one
        value broadcast (0-d, or every stride 0: repops.reference.prims.const), else MAT."""
        a = np.asarray(a)
        placed = placement(a)
        if placed is not None:  # laid out by prims.place: background and pieces, each a view or constant
            axis, background, pieces = placed
            ds = [(start, step, piece.shape[axis], self.describe(piece)) for start, step, piece in pieces]
            if any(d[0] not in (VIEW, CONST) for *_, d in ds):
                return bytes([MAT])
            return cat(axis, a.shape, ds, background)
        if a.size == 0:  # no element to source
            return constant(np.zeros((), a.dtype), a.shape)
        found = self._find(a)
        if found is None and a.size and (a.ndim == 0 or not any(a.strides)):
            return constant(np.asarray(a.reshape(-1)[:1] if a.ndim == 0 else a.flat[0], a.dtype), a.shape)
        if found is None:
            return bytes([MAT])
        src, offset = found
        return view(src, offset, a.shape, [s // a.itemsize for s in a.strides])

    @staticmethod
    def span(a) -> tuple[int, int]:
        """[lo, hi): the bytes a non-empty array's elements lie in."""
        lo = hi = a.__array_interface__["data"][0]
        for d, s in zip(a.shape, a.strides):
            (lo, hi) = (lo, hi + (d - 1) * s) if s >= 0 else (lo + (d - 1) * s, hi)
        return lo, hi + a.itemsize

    def _find(self, a):
        if a.size == 0:
            return None
        lo, hi = self.span(a)
        root = self._key(a)
        same = self._by_root.get(root)
        if same is not None and root not in self._aliased:  # no other root's memory overlaps this one:
            for i in reversed(same):  # the latest source that holds it is one of this root's (a fold's
                found = self._within(i, a, lo, hi)  # thousands of kernels: not a scan of every source each)
                if found is not None:
                    return found
            return None
        return self.scan(a, lo, hi)

    def scan(self, a, lo, hi):
        """The latest of every source that holds a's bytes [lo, hi) (the search's definition)."""
        for i in range(len(self.arrays) - 1, -1, -1):
            found = self._within(i, a, lo, hi)
            if found is not None:
                return found
        return None

    def _within(self, i, a, lo, hi):
        src = self.arrays[i]
        if src.dtype != a.dtype or not src.flags.c_contiguous or src.size == 0:
            return None
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

    def kernels(self, keep: int | None = None, commit_all: bool = True, tamper=None, tamper_after=None) -> list[Kernel]:
        """The decomposition's kernels and the result pseudo-kernel, computed on past a fault
        (repops.faults.noted: the structure never depends on values); `self.fault` is then
        (kernel, element, rule) of the first `fault` kernel with a true element, else None.
        keep: index of a kernel
        whose operand and output arrays are kept (levels 4-5). tamper(k, output array) and
        tamper_after (the same, once kernel k is committed): a dishonest party's hooks
        (offchain.adversaries), never used by an honest one."""
        src = _Sources()
        inputs = [t.clone() for t in self.inputs]  # fresh each run: an in-place op mutates them
        for t in inputs:
            src.add(t.numpy())
        out: list[Kernel] = []
        # the previous kernel's output and its commitment: a matmul's or a fold's next step reads
        # it as its accumulator (the same array object, unchanged: the reference never writes an
        # array in place), hashed once; not when a cheater changes outputs after committing them
        last = [None, merkle.ZERO]
        maps = _map_kernels()
        reuse = commit_all and tamper_after is None and bool(maps)

        def seen(name, args, result):
            k = len(out)
            if tamper is not None:
                tamper(k, result)
            arrays = [np.asarray(a) for a in args]
            desc = [src.describe(a) for a in arrays]
            res = np.asarray(result)
            operands = [last[1] if a is last[0] else commit(a, self.chunk) for a in arrays] if commit_all else []
            kern = Kernel(name, desc, operands, commit(res, self.chunk) if commit_all else merkle.ZERO)
            if reuse:
                last[:] = res, kern.output
            if keep == k:
                kern.arrays = [np.array(a, copy=True) for a in arrays]
                kern.out_array = np.array(res, copy=True)
            out.append(kern)
            src.add(res if res.flags.c_contiguous else np.ascontiguousarray(res))
            if tamper_after is not None:
                tamper_after(k, result)
        from repops import faults
        from repops.reference.prims import observe
        args, kwargs = decode(self.attrs, inputs)
        found = []  # the first fault: (kernel, element, rule)
        with observe(seen, maps), repops.deterministic("reference"), faults.noted(
                lambda rule, e: found or found.append((len(out) - 1, e, rule))):
            result = self.func(*args, **kwargs)
        self.fault = found[0] if found else None
        produced = output_tensors(self.func, args, kwargs, result)  # the node's output slots
        results = [r for r in produced if r is not None]
        arrays = [r.detach().numpy() for r in results]
        desc = [src.describe(a) for a in arrays]
        rule = RESULT_RULES.get(self.op_name)
        inplace = INPLACE_RULES.get(self.op_name)
        if len(results) == 1 and (inplace is not None or (rule is not None and desc[0][0] == MAT)):
            args, _ = decode(self.attrs, inputs)
            d = (inplace or rule)(args, lambda t: next(i for i, x in enumerate(inputs) if x is t), results[0])
            desc[0] = d if d is not None else bytes([MAT])
        # a slot with no tensor (an op that returns nothing) is an absent output: EMPTY
        descs, comms, it = [], [], iter(zip(desc, results))
        for r in produced:
            d, t = next(it) if r is not None else (constant(np.float32(0.0), ()), None)
            descs.append(d)
            comms.append(EMPTY if t is None else commit(t, self.chunk))
        final = Kernel(RESULT, descs, comms, merkle.ZERO)
        if keep == len(out):
            final.arrays = [np.zeros((), np.float32) if a is None else np.array(a, copy=True)
                            for a in self._slots(produced, arrays)]
        out.append(final)
        self.results = results
        return out

    @staticmethod
    def _slots(produced, arrays):
        it = iter(arrays)
        return [next(it) if r is not None else None for r in produced]


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
        size = descriptor_size(enc, o)
        descs.append(enc[o:o + size])
        comms.append(enc[o + size:o + size + 32])
        o += size + 32
    if len(enc) != o + 32:
        raise ValueError("kernel encoding has the wrong length")
    return name, descs, comms, enc[o:o + 32]


def descriptor_size(enc: bytes, o: int = 0) -> int:
    kind = enc[o]
    if kind == VIEW:
        return 12 + 16 * enc[o + 11]
    if kind == CONST:
        return 3 + 8 * enc[o + 2] + CODES[enc[o + 1]].itemsize
    if kind == CAT:
        p = o + 2 + descriptor_size(enc, o + 2)
        n, p = int.from_bytes(enc[p:p + 2], "big"), p + 2
        for _ in range(n):
            p += 24 + descriptor_size(enc, p + 24)
        return p - o
    if kind == MAT:
        return 1
    raise ValueError(f"unknown operand descriptor kind {kind}")


def pieces(descriptor: bytes):
    """A CAT descriptor -> (axis, background CONST, [(start, step, width, sub-descriptor)])."""
    axis, p = descriptor[1], 2 + descriptor_size(descriptor, 2)
    background = descriptor[2:p]
    n, p, out = int.from_bytes(descriptor[p:p + 2], "big"), p + 2, []
    for _ in range(n):
        a, b, w = (int.from_bytes(descriptor[p + 8 * i:p + 8 * i + 8], "big") for i in range(3))
        size = descriptor_size(descriptor, p + 24)
        out.append((a, b, w, descriptor[p + 24:p + 24 + size]))
        p += 24 + size
    return axis, background, out


def element_of(descriptor: bytes, index: int):
    """For operand element `index` (flat, row-major): ('view', source, source flat index) or
    ('const', value bytes) or ('mat',)."""
    kind = descriptor[0]
    if kind == CONST:
        ndim = descriptor[2]
        return ("const", descriptor[3 + 8 * ndim:])
    if kind == MAT:
        return ("mat",)
    if kind == CAT:
        axis, background, parts = pieces(descriptor)
        idx = [int(i) for i in np.unravel_index(index, operand_shape(descriptor))]
        at = idx[axis]
        for start, step, width, sub in parts:
            if at >= start and step and (at - start) % step == 0 and (at - start) // step < width:
                idx[axis] = (at - start) // step
                return element_of(sub, int(np.ravel_multi_index(idx, operand_shape(sub))))
        return element_of(background, 0)
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
    if kind == CAT:
        return operand_shape(pieces(descriptor)[1])
    return None

