"""Tensor commitments (docs/PROTOCOL.md §3): a Merkle tree over fixed-size chunks of the
tensor's canonical bytes (row-major, little-endian), sealed with dtype and shape, so one
element is provable with one chunk and log2(chunks) hashes."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import chunktree, merkle
from .encoding import u8, u64

# uint8: what torch returns as a byte buffer (batch norm's reserve space); never a kernel operand
DTYPES = {np.dtype("<f4"): 1, np.dtype("<i8"): 2, np.dtype("bool"): 3, np.dtype("<i4"): 4, np.dtype("u1"): 5}
CODES = {c: d for d, c in DTYPES.items()}
TENSOR = b"\x03"


class TensorError(ValueError):
    pass


def _no_commitment(dtype) -> TensorError:
    return TensorError(f"no tensor commitment for dtype {dtype}: Verde commits float32, int64, int32, uint8 and bool")


def canonical(x) -> np.ndarray:
    """A contiguous little-endian array of a committed dtype (torch tensors included)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if not x.is_contiguous():
            x = x.contiguous()
        x = x.numpy()
    a = np.asarray(x)
    a = a if a.flags.c_contiguous else a.copy()  # (ascontiguousarray would make 0-d 1-d)
    dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    if dt not in DTYPES:
        raise _no_commitment(a.dtype)
    return a.astype(dt, copy=False)


def header(code: int, shape: tuple) -> bytes:
    return TENSOR + u8(code) + u8(len(shape)) + b"".join(u64(d) for d in shape)


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def chunk_count(shape, chunk: int) -> int:
    """Chunks of a tensor of `shape` (its chunk tree's leaves)."""
    return -(-numel(shape) // chunk)


def parse_header(head: bytes) -> tuple[int, tuple]:
    """header() -> (dtype code, shape); TensorError when it is not one."""
    if len(head) < 3 or head[:1] != TENSOR or len(head) != 3 + 8 * head[2] or head[1] not in CODES:
        raise TensorError("not a tensor header")
    return head[1], tuple(int.from_bytes(head[3 + 8 * i:11 + 8 * i], "big") for i in range(head[2]))


@dataclass(frozen=True)
class Committed:
    """A tensor with its chunk tree: answers element proofs. The tree's nodes are hashed in
    one call (chunktree: C, every core); the Python Tree over them is built only when a
    proof or a node is asked for."""
    array: np.ndarray
    chunk: int  # elements per chunk
    nodes: bytes | None = field(default=None, repr=False, compare=False)  # its tree's nodes, if already hashed (commit_many)

    def __post_init__(self):
        object.__setattr__(self, "_nodes", self.nodes if self.nodes is not None else
                           chunktree.nodes(self.array, self.chunk * self.array.itemsize))

    @property
    def n(self) -> int:
        return chunk_count(self.array.shape, self.chunk)

    @cached_property
    def tree(self) -> merkle.Tree:
        return merkle.Tree.from_nodes(self.n, self._nodes)

    def chunk_bytes(self, c: int) -> bytes:
        return self.array.reshape(-1)[c * self.chunk:(c + 1) * self.chunk].tobytes()

    @property
    def code(self) -> int:
        return DTYPES[self.array.dtype]

    @property
    def seal(self) -> "Seal":
        return Seal(self.code, merkle.seal(self.n, self._nodes[-32:]))

    @property
    def root(self) -> bytes:
        return self.seal.commitment(self.array.shape)

    def element_proof(self, flat_index: int) -> "ElementProof":
        n = self.array.size
        if not 0 <= flat_index < n:
            raise TensorError(f"element {flat_index} outside a tensor of {n} elements")
        c = flat_index // self.chunk
        return ElementProof(self.code, tuple(self.array.shape), self.chunk, flat_index, self.chunk_bytes(c),
                            tuple(self.tree.proof(c)))


def _check_chunk(chunk: int) -> None:
    if chunk < 1:
        raise TensorError(f"chunk size must be >= 1 element, got {chunk}")


def commit(x, chunk: int) -> bytes:
    return commit_sealed(x, chunk)[0]


def commit_many(xs, chunk: int) -> list[bytes]:
    """commit() of each tensor. The host's small ones (below a MiB a core: one thread each)
    are hashed in one call, shared out among the cores: a model's state is hundreds of them,
    where one call per tensor paid ~12 us of Python each and ran on one core."""
    _check_chunk(chunk)
    roots: list = [None] * len(xs)
    small: dict = {}  # itemsize -> [(index, canonical array)]: one chunk size a call
    big = chunktree.threads() * chunktree.MIN_BYTES
    for i, x in enumerate(xs):
        if getattr(x, "is_cuda", False):
            roots[i] = commit(x, chunk)  # (hashed where it lives, or downloaded: commit_sealed decides)
            continue
        a = canonical(x)
        if a.nbytes >= big:
            roots[i] = commit(a, chunk)  # (its own tree on every core)
        else:
            small.setdefault(a.itemsize, []).append((i, a))
    for itemsize, group in small.items():
        trees = chunktree.nodes_many([a for _, a in group], chunk * itemsize)
        for (i, a), nodes in zip(group, trees):
            roots[i] = Committed(a, chunk, nodes).root
    return roots


@dataclass(frozen=True)
class Seal:
    """A commitment without its shape: the dtype and the sealed chunk tree, which depends only
    on the row-major bytes. A tensor with the same bytes and another shape (a view, a reshape)
    is committed from it without hashing its bytes again."""
    code: int
    chunks: bytes

    def commitment(self, shape) -> bytes:
        return merkle.sha256(header(self.code, tuple(shape)), self.chunks)


def commit_sealed(x, chunk: int) -> tuple[bytes, Seal]:
    """(commitment, its Seal). A CUDA tensor of DEVICE_MIN_BYTES or more is hashed on its GPU
    (chunktree.tree_on_device) once the device's tree has matched the host's on the
    self-check's vectors; anything else on the host (a small tensor's launches and sync cost
    more than its download)."""
    _check_chunk(chunk)
    if getattr(x, "is_cuda", False) and x.numel() * x.element_size() >= chunktree.DEVICE_MIN_BYTES and (
            rt := chunktree.device_runtime()) is not None:
        return read_tops([_top_on_device(rt, x, chunk)])[0]  # (the host reads the 32-byte top, never the tensor)
    c = Committed(canonical(x), chunk)
    seal = c.seal
    return seal.commitment(c.array.shape), seal


def _top_on_device(rt, t, chunk: int) -> "DeviceTop":
    """A CUDA tensor's canonical bytes (row-major: a contiguous copy where it is a view) hashed
    where they live."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    from repops.cuda.device import _NUMPY, as_array, torch_stream
    dt = _NUMPY.get(t.dtype)
    if dt not in DTYPES:
        raise _no_commitment(t.dtype)
    with _disable_current_modes(), torch_stream():  # (torch's own copy and views: never a traced op)
        raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
        return top_on_device(rt, as_array(raw), DTYPES[dt], t.shape, chunk)


@dataclass(frozen=True)
class DeviceTop:
    """A tensor's chunk tree hashed on a device, its 32-byte top not read yet (`array`, on rt):
    its commitment once read_tops reads it, with many others in one download."""
    rt: object
    array: object
    code: int
    shape: tuple
    chunk: int


def top_on_device(rt, data, code: int, shape, chunk: int) -> DeviceTop:
    """The chunk tree of a tensor of dtype `code` and `shape` whose canonical bytes are `data`
    (a uint8 device array of rt), hashed where they live; nothing read."""
    out = chunktree.tree_on_device(rt, data, chunk * CODES[code].itemsize)
    return DeviceTop(rt, out[-32:], code, tuple(shape), chunk)


def commit_later(x, chunk: int) -> DeviceTop | None:
    """A CUDA tensor hashed on its GPU with nothing read (any size: no download to weigh the
    launches against), for read_tops later; None where it is not one (commit it at once). A
    traced step then never waits for the device between its ops (StepRecorder)."""
    _check_chunk(chunk)
    if not getattr(x, "is_cuda", False) or (rt := chunktree.device_runtime()) is None:
        return None
    return _top_on_device(rt, x, chunk)


def read_tops(tops: list) -> list[tuple[bytes, Seal]]:
    """(commitment, Seal) of each DeviceTop: their tops read in one download per runtime."""
    from repops.cuda.device import stream_for
    tops_of: dict = {}
    for i, t in enumerate(tops):
        tops_of.setdefault(id(t.rt), []).append(i)
    got: list = [None] * len(tops)
    for idx in tops_of.values():
        rt = tops[idx[0]].rt
        with stream_for(rt.xp):  # (after the trees' launches, on their stream)
            arrays = [tops[i].array for i in idx]
            host = rt.download(arrays[0] if len(arrays) == 1 else rt.xp.concatenate(arrays)).tobytes()
        for k, i in enumerate(idx):
            t = tops[i]
            seal = Seal(t.code, merkle.seal(chunk_count(t.shape, t.chunk), host[32 * k:32 * k + 32]))
            got[i] = (seal.commitment(t.shape), seal)
    return got



@dataclass(frozen=True)
class ElementProof:
    code: int
    shape: tuple
    chunk: int
    index: int              # flat, row-major
    chunk_bytes: bytes
    siblings: tuple

    def element(self) -> bytes:
        size = CODES[self.code].itemsize
        off = (self.index % self.chunk) * size
        return self.chunk_bytes[off:off + size]

    def verify(self, root: bytes) -> bool:
        n = numel(self.shape)
        if self.code not in CODES or not 0 <= self.index < n:
            return False
        size = CODES[self.code].itemsize
        nchunks = chunk_count(self.shape, self.chunk)
        c = self.index // self.chunk
        expect = min(self.chunk, n - c * self.chunk) * size
        if len(self.chunk_bytes) != expect:
            return False
        tree_root = merkle.seal(nchunks, self._top(nchunks, c))
        return merkle.sha256(header(self.code, self.shape), tree_root) == root

    def _top(self, nchunks, c):
        try:
            return merkle.top_from_proof(nchunks, c, merkle.leaf_hash(self.chunk_bytes), list(self.siblings))
        except merkle.ProofError:
            return b""
