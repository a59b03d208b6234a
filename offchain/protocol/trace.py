"""The trace of one training step as AugmentedCGNodes (docs/PROTOCOL.md §4), recorded
by the hook of repops.deterministic(): every aten op in dispatch order (forward, backward,
optimizer, in-place and views included) becomes a node with its op, attributes, input
references and the commitments of its input and output tensors.

An input reference says where a tensor came from: a node of this step (index, output
slot), a state tensor at the start of the step (parameters, buffers, optimizer state), or a
data tensor of the step's batch. Anything else is a TraceError, never a guess.
"""
from __future__ import annotations

import dataclasses
import os
import weakref
from dataclasses import dataclass, field

import torch

from . import merkle, tensors
from .encoding import string, u8, u16, u32, value
from .tensors import commit_sealed

NODE_OUT, STATE, DATA = 0, 1, 2
STRUCTURE, NODE, FAULT_NODE = b"\x05", b"\x04", b"\x0d"
EMPTY = bytes(32)  # the commitment slot of a missing (None) output


class TraceError(RuntimeError):
    """The step does something the recorder cannot describe truthfully."""


@dataclass(frozen=True)
class Ref:
    kind: int   # NODE_OUT, STATE or DATA
    index: int  # node index / state index / data index
    slot: int = 0

    def encode(self) -> bytes:
        return u8(self.kind) + u32(self.index) + u16(self.slot)


@dataclass(frozen=True)
class Node:
    op: str
    attrs: bytes
    refs: tuple
    inputs: tuple = ()   # tensor commitments, one per ref
    outputs: tuple = ()  # tensor commitments, one per output slot
    fault: tuple | None = None  # (kernel, element): the node faults there instead (no outputs)

    def structure(self) -> bytes:
        """What the graph commitment fixes: op, attributes, wiring (no values)."""
        return (STRUCTURE + string(self.op) + u32(len(self.attrs)) + self.attrs + u16(len(self.refs)) +
                b"".join(r.encode() for r in self.refs))

    def encode(self) -> bytes:
        """A node that faults (docs/PROTOCOL.md §4) has its own tag and, where outputs would be,
        the kernel of its decomposition and the element where it faults."""
        head = merkle.sha256(self.structure()) + u16(len(self.inputs)) + b"".join(self.inputs)
        if self.fault is not None:
            return FAULT_NODE + head + u32(self.fault[0]) + self.fault[1].to_bytes(8, "big")
        return NODE + head + u16(len(self.outputs)) + b"".join(self.outputs)

    def leaf(self) -> bytes:
        return merkle.leaf_hash(self.encode())



def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in _tensors(x[k])]
    return []


def _mutated(func, args, kwargs) -> list[torch.Tensor]:
    out = []
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            v = args[i] if i < len(args) else kwargs.get(a.name)
            out += _tensors(v)
    return out


def output_tensors(func, args, kwargs, out) -> list:
    """The tensors a node commits as its outputs, in slot order: what the op returned (None
    where it returned no tensor), then every input it wrote that it did not also return
    (schema alias annotations: in-place ops, repops.adamw_). The recorder and the level-3
    decomposition (oprun) both take their outputs from here."""
    outs = out if isinstance(out, (list, tuple)) else [out]
    outs = [o if isinstance(o, torch.Tensor) else None for o in outs]
    return outs + [m for m in _mutated(func, args, kwargs) if all(m is not o for o in outs)]


@dataclass
class _Where:
    tensor: weakref.ref
    ref: Ref
    writes: int  # writes to its storage when this version was made
    commitment: bytes | None = None  # computed once per version: an output is an input later


# ops whose output holds its one input's values in the same row-major order (same dtype and
# count): its commitment is its input's Seal under the output's shape, no hashing. Same roots:
# the commitment is a format (docs/PROTOCOL.md §3).
SAME_BYTES = frozenset(f"aten.{op}" for op in (
    "view.default", "_unsafe_view.default", "reshape.default", "alias.default", "clone.default",
    "squeeze.default", "squeeze.dim", "squeeze.dims", "unsqueeze.default", "flatten.using_ints", "unflatten.int",
    "lift_fresh_copy.default"))
RESEAL = True  # (tests turn it off to compare every node with its output hashed)
LATER = True  # CUDA tensors' tops read when the step is over (StepRecorder.resolve; tests compare both)


@dataclass
class StepRecorder:
    """Pass `recorder` as repops.deterministic(trace=recorder). With values=False (meta
    tensors, or the graph only) no tensor is hashed: commitments stay empty."""
    state: list
    data: list
    chunk: int = 1024
    values: bool = True
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)  # per node: its output tensors (kept only if keep)
    keep: bool | frozenset = False  # True: every node's outputs; a set of node indices: theirs (None elsewhere)
    hashed: int = 0  # bytes hashed so far (a resealed output costs none)
    tensors_hashed: int = 0  # tensors hashed so far (on a GPU each costs launches, whatever its size)
    hashed_by: dict = field(default_factory=dict)  # those bytes by producer: an op (its outputs), or the step's inputs
    layouts: list = field(default_factory=list)  # per node: its inputs' (dtype, shape, stride, offset), as read

    def __post_init__(self):
        # a CUDA tensor's commitment is hashed on its GPU and read when the step is over (resolve):
        # until then a unique stand-in (32 random bytes) -> the tree's top on the device, so the
        # host never waits for the device between two ops; `settled` maps every stand-in resolved
        self._later: dict[bytes, tensors.DeviceTop] = {}
        self._settled: dict[bytes, bytes] = {}
        self._where: dict[int, _Where] = {}
        self._writes: dict[int, int] = {}
        self._seals: dict = {}  # commitment -> its tensors.Seal (SAME_BYTES)
        # (storage, offset, shape, dtype) of a contiguous tensor -> (that tensor, its storage's writes
        # then, its commitment): another op's output over the same bytes, row-major, is that commitment
        self._rowmajor: dict = {}
        for i, t in enumerate(self.state):
            self._bind(t, Ref(STATE, i))
        for i, t in enumerate(self.data):
            self._bind(t, Ref(DATA, i))

    # -- storage versions: a read through a stale alias is refused -----------------------------
    @staticmethod
    def _storage(t: torch.Tensor):
        if t.device.type == "meta":
            return None
        storage = t.untyped_storage()
        return storage.data_ptr() if storage.nbytes() else None  # (empty storages share address 0)

    def _bind(self, t: torch.Tensor, ref: Ref, commitment: bytes | None = None):
        s = self._storage(t)
        self._where[id(t)] = _Where(weakref.ref(t), ref, self._writes.get(s, 0), commitment)

    def commitment(self, t: torch.Tensor) -> bytes:
        """The commitment of t's current version, hashed once per version (an op's output is
        read again as inputs and as end-of-step state)."""
        c = self._commitment(t)
        self.resolve()
        return self._settled.get(c, c)

    def _commitment(self, t: torch.Tensor) -> bytes:
        """commitment(), inside the step: a CUDA tensor's may still be a stand-in."""
        self._lookup(t, "a commitment")
        w = self._where[id(t)]
        if w.commitment is None:
            w.commitment = self._commit(t)
        return w.commitment

    def touched(self, t: torch.Tensor) -> None:
        """t's data changed outside any op: its next reads are committed anew."""
        w = self._where.get(id(t))
        if w is not None and w.tensor() is t:
            w.commitment = None
        s = self._storage(t)
        for key in [k for k in self._rowmajor if k[0] == s]:
            del self._rowmajor[key]

    def _lookup(self, t: torch.Tensor, op: str) -> Ref:
        w = self._where.get(id(t))
        if w is None or w.tensor() is not t:
            raise TraceError(f"{op} reads a tensor {tuple(t.shape)} that is neither the output of an op of "
                             "this step, nor a state tensor, nor a data tensor of the batch: register it as "
                             "state (a parameter or buffer) or compute it inside the step")
        s = self._storage(t)
        if s is not None and self._writes.get(s, 0) != w.writes:
            raise TraceError(f"{op} reads a tensor {tuple(t.shape)} whose memory an in-place op rewrote "
                             "through another alias: the trace cannot name its producer; avoid in-place "
                             "writes through views")
        return w.ref

    def _commit(self, t, by: str = "state and data") -> bytes:
        if not self.values or t.device.type == "meta":
            return EMPTY
        n = t.numel() * t.element_size()
        self.hashed += n
        self.tensors_hashed += 1
        self.hashed_by[by] = self.hashed_by.get(by, 0) + n
        top = tensors.commit_later(t, self.chunk) if LATER else None
        if top is not None:
            root = self._stand_in(top)
        else:
            root, self._seals[root] = commit_sealed(t, self.chunk)
        key = self._rowmajor_key(t)
        if key is not None:
            self._rowmajor[key] = (weakref.ref(t), self._writes.get(key[0], 0), root)
        return root

    def _stand_in(self, top: tensors.DeviceTop) -> bytes:
        """A commitment whose tree's top is still on the device: 32 random bytes until resolve."""
        root = os.urandom(32)
        self._later[root] = top
        return root

    def _rowmajor_key(self, t: torch.Tensor):
        s = self._storage(t)
        return None if s is None or not t.is_contiguous() else (s, t.storage_offset(), tuple(t.shape), t.dtype)

    def _out_commit(self, op: str, ins: list, in_commits: tuple, o: torch.Tensor) -> bytes:
        """An output's commitment: its input's Seal under its shape when the op only moves the
        bytes (SAME_BYTES); the commitment of a tensor already hashed over the same bytes in the
        same row-major layout (a transpose of a transposed weight: the weight), while that tensor
        lives and its memory is unwritten; else hashed."""
        same = RESEAL and op in SAME_BYTES and len(ins) == 1 and in_commits and ins[0].dtype == o.dtype and \
            ins[0].numel() == o.numel()
        top = self._later.get(in_commits[0]) if same else None
        if top is not None:  # (its input's tree, under the output's shape: another stand-in)
            return self._stand_in(dataclasses.replace(top, shape=tuple(o.shape)))
        seal = self._seals.get(in_commits[0]) if same else None
        if seal is None:
            key = self._rowmajor_key(o) if RESEAL and self.values else None
            hit = self._rowmajor.get(key) if key is not None else None
            src = hit[0]() if hit is not None else None
            # (that tensor alive and still over this memory, so the memory was never reused; unwritten since)
            if src is not None and self._storage(src) == key[0] and hit[1] == self._writes.get(key[0], 0):
                return hit[2]
            return self._commit(o, op)
        root = seal.commitment(o.shape)
        self._seals[root] = seal
        return root

    # -- the hooks ------------------------------------------------------------------------------
    def before(self, func, args, kwargs):
        """Inputs are committed before the op runs: an in-place op changes its input."""
        op = str(func)
        ins = _tensors(args) + _tensors(kwargs)
        refs = tuple(self._lookup(t, op) for t in ins)
        self._pending = (func, refs, tuple(self._commitment(t) for t in ins) if self.values else ())
        self._call = (args, kwargs)
        self._layouts = tuple((str(t.dtype), tuple(t.shape), tuple(t.stride()), t.storage_offset()) for t in ins)

    @staticmethod
    def _attrs(args, kwargs) -> bytes:
        ins = _tensors(args) + _tensors(kwargs)
        slots = {id(t): i for i, t in reversed(list(enumerate(ins)))}
        return value([list(args), kwargs], lambda t: slots[id(t)])

    def faulted(self) -> tuple[Node, list]:
        """After an op raised a repops Fault: that op as a node (outputs and fault left to the
        caller, who decomposes it to find where) and its input tensors, as they were when it
        started (the spec checks before it writes)."""
        pending = getattr(self, "_pending", None)
        if pending is None:
            raise TraceError("no op was being recorded when the fault was raised")
        func, refs, in_commits = pending
        args, kwargs = self._call
        self.resolve()
        in_commits = tuple(self._settled.get(c, c) for c in in_commits)
        return Node(str(func), self._attrs(args, kwargs), refs, in_commits), _tensors(args) + _tensors(kwargs)

    def __call__(self, func, args, kwargs, out):
        op = str(func)
        pending = getattr(self, "_pending", None)
        if pending is None or pending[0] is not func:
            raise TraceError(f"{op}: the recorder was not called before the op (use repops.deterministic(trace=...))")
        self._pending = None
        _, refs, in_commits = pending
        if self._settled:  # (resolved while the op ran: its inputs' stand-ins are settled)
            in_commits = tuple(self._settled.get(c, c) for c in in_commits)
        attrs = self._attrs(args, kwargs)
        produced = output_tensors(func, args, kwargs, out)
        index = len(self.nodes)
        for m in _mutated(func, args, kwargs):
            s = self._storage(m)
            if s is not None:
                self._writes[s] = self._writes.get(s, 0) + 1
        ins = _tensors(args) + _tensors(kwargs)
        out_commits = tuple(EMPTY if o is None else self._out_commit(op, ins, in_commits, o) for o in produced)
        node = Node(op, attrs, refs, in_commits, out_commits if self.values else ())
        for slot, o in enumerate(produced):
            if o is not None:
                self._bind(o, Ref(NODE_OUT, index, slot), out_commits[slot] if self.values else None)
        self.nodes.append(node)
        self.layouts.append(self._layouts)
        if self.keep:
            kept = self.keep is True or index in self.keep
            self.outputs.append([None if o is None or not kept else o.detach().clone() for o in produced])

    def alias(self, source: torch.Tensor, alias: torch.Tensor) -> None:
        """An alias op (repops.aten.ALIASES: detach) is no node: the alias is its source, same
        ref, same commitment. Autograd issues them by reference counts, which the trace must
        not see."""
        ref = self._lookup(source, "an alias")
        self._bind(alias, ref, self._where[id(source)].commitment)

    def where(self, t: torch.Tensor) -> Ref:
        """Where a tensor's current value comes from (e.g. each state tensor after the step)."""
        return self._lookup(t, "the end of the step")

    # -- commitments ---------------------------------------------------------------------------
    def resolve(self) -> None:
        """Read the tops of the CUDA tensors hashed on their GPU (one download), and put their
        commitments wherever a stand-in stood: the nodes, the tensors' versions, the seals.
        Every reader of the step's nodes or commitments after the step calls it first (the
        trainer when its step ends; trace_root, commitment and faulted themselves)."""
        if not self._later:
            return
        stand_ins = list(self._later)
        read = tensors.read_tops([self._later[r] for r in stand_ins])
        real = {r: root for r, (root, _) in zip(stand_ins, read)}
        self._seals.update({root: seal for root, seal in read})
        self._later.clear()
        self._settled.update(real)
        sub = lambda cs: tuple(real.get(c, c) for c in cs)  # noqa: E731
        self.nodes[:] = [dataclasses.replace(n, inputs=sub(n.inputs), outputs=sub(n.outputs)) for n in self.nodes]
        if any(c in self._settled for n in self.nodes for c in (*n.inputs, *n.outputs)):  # (never: a claim with one loses)
            raise TraceError("a stand-in commitment is left in the trace after its top was read (a recorder bug)")
        for w in self._where.values():
            w.commitment = real.get(w.commitment, w.commitment)
        self._rowmajor = {k: (t, writes, real.get(c, c)) for k, (t, writes, c) in self._rowmajor.items()}

    def trace_root(self) -> bytes:
        self.resolve()
        return merkle.root_of(n.leaf() for n in self.nodes)


class DecodeError(ValueError):
    """Bytes that are not a well-formed node or structure encoding."""


def decode_node(enc: bytes) -> tuple[bytes, list[bytes], list[bytes] | tuple[int, int]]:
    """node encoding -> (structure hash, input commitments, output commitments), or for a node
    that faults (tag 0x0D) its (kernel, element) tuple in place of the output list."""
    try:
        if enc[:1] not in (NODE, FAULT_NODE):
            raise DecodeError("not a node encoding (tag)")
        sh = enc[1:33]
        nin = int.from_bytes(enc[33:35], "big")
        ins = [enc[35 + 32 * i: 67 + 32 * i] for i in range(nin)]
        o = 35 + 32 * nin
        if enc[:1] == FAULT_NODE:
            if len(enc) != o + 12 or len(sh) != 32:
                raise DecodeError("fault node encoding has the wrong length")
            return sh, ins, (int.from_bytes(enc[o:o + 4], "big"), int.from_bytes(enc[o + 4:o + 12], "big"))
        nout = int.from_bytes(enc[o:o + 2], "big")
        outs = [enc[o + 2 + 32 * i: o + 34 + 32 * i] for i in range(nout)]
        if len(enc) != o + 2 + 32 * nout or len(sh) != 32:
            raise DecodeError("node encoding has the wrong length")
        return sh, ins, outs
    except IndexError:
        raise DecodeError("truncated node encoding") from None


def decode_structure(data: bytes) -> tuple[str, bytes, list[Ref]]:
    """structure encoding -> (op, attrs, refs)."""
    if data[:1] != STRUCTURE:
        raise DecodeError("not a structure encoding (tag)")
    n = int.from_bytes(data[1:5], "big")
    op = data[5:5 + n].decode("utf-8", "replace")
    o = 5 + n
    na = int.from_bytes(data[o:o + 4], "big")
    attrs = data[o + 4:o + 4 + na]
    o += 4 + na
    nr = int.from_bytes(data[o:o + 2], "big")
    o += 2
    if len(data) != o + 7 * nr:
        raise DecodeError("structure encoding has the wrong length")
    refs = [Ref(data[o + 7 * i], int.from_bytes(data[o + 7 * i + 1:o + 7 * i + 5], "big"),
                int.from_bytes(data[o + 7 * i + 5:o + 7 * i + 7], "big")) for i in range(nr)]
    return op, attrs, refs
