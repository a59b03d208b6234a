"""SHA-256 Merkle trees with domain separation (docs/PROTOCOL.md §2).

leaf  = H(0x00 || data)            inner = H(0x01 || left || right)
The leaf level is padded with ZERO (32 zero bytes, not hashed) to the next power of two;
root = H(0x02 || u64be(n) || top), so a root also fixes the number of leaves. A proof is the
list of siblings from the leaf upwards; its length is depth(n) = ceil(log2 n).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

ZERO = bytes(32)
LEAF, INNER, ROOT = b"\x00", b"\x01", b"\x02"


class ProofError(ValueError):
    """A membership proof that does not fit its tree (wrong length, index out of range)."""


def sha256(*parts: bytes) -> bytes:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.digest()


def leaf_hash(data: bytes) -> bytes:
    return sha256(LEAF, data)


def inner_hash(left: bytes, right: bytes) -> bytes:
    return sha256(INNER, left, right)


def depth(n: int) -> int:
    return (n - 1).bit_length() if n > 1 else 0


def _levels(leaves: list[bytes]) -> list[list[bytes]]:
    """All levels, leaves first; each padded with ZERO to an even length (but the top)."""
    level = list(leaves) + [ZERO] * ((1 << depth(len(leaves))) - len(leaves)) if leaves else [ZERO]
    levels = [level]
    while len(level) > 1:
        level = [inner_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels


def seal(n: int, top: bytes) -> bytes:
    return sha256(ROOT, n.to_bytes(8, "big"), top)


@dataclass(frozen=True)
class Tree:
    """A tree over leaf HASHES (callers hash their data with leaf_hash)."""
    leaves: tuple[bytes, ...]

    def __post_init__(self):
        object.__setattr__(self, "_levels", _levels(list(self.leaves)))

    @classmethod
    def from_nodes(cls, n: int, nodes: bytes) -> "Tree":
        """The n-leaf tree whose levels (leaves first, padded as _levels pads them) are `nodes`,
        32 bytes a node, concatenated: what chunktree.nodes computes without Python hashing."""
        levels, off, m = [], 0, 1 << depth(n)
        if len(nodes) != 32 * (2 * m - 1):
            raise ProofError(f"a tree of {n} leaves has {2 * m - 1} nodes, got {len(nodes) / 32}")
        while True:
            levels.append([nodes[32 * (off + i):32 * (off + i + 1)] for i in range(m)])
            off += m
            if m == 1:
                break
            m //= 2
        t = object.__new__(cls)
        object.__setattr__(t, "leaves", tuple(levels[0][:n]))
        object.__setattr__(t, "_levels", levels)
        return t

    @property
    def n(self) -> int:
        return len(self.leaves)

    @property
    def top(self) -> bytes:
        return self._levels[-1][0]

    @property
    def root(self) -> bytes:
        return seal(self.n, self.top)

    def node(self, height: int, index: int) -> bytes:
        """A node by height (0: the leaves) and index, for Merkle descent; ZERO outside
        the tree (whoever reads it then finds that the tree is not the size it claims)."""
        levels = self._levels
        return levels[height][index] if 0 <= height < len(levels) and 0 <= index < len(levels[height]) else ZERO

    def proof(self, index: int) -> list[bytes]:
        if not 0 <= index < self.n:
            raise ProofError(f"leaf index {index} outside a tree of {self.n} leaves")
        out = []
        for level in self._levels[:-1]:
            out.append(level[index ^ 1])
            index >>= 1
        return out


def root_of(leaf_hashes) -> bytes:
    return Tree(tuple(leaf_hashes)).root


def top_from_proof(n: int, index: int, leaf: bytes, siblings: list[bytes]) -> bytes:
    if not 0 <= index < n:
        raise ProofError(f"leaf index {index} outside a tree of {n} leaves")
    if len(siblings) != depth(n):
        raise ProofError(f"a proof in a tree of {n} leaves has {depth(n)} siblings, got {len(siblings)}")
    h = leaf
    for s in siblings:
        h = inner_hash(s, h) if index & 1 else inner_hash(h, s)
        index >>= 1
    return h


def verify(root: bytes, n: int, index: int, leaf: bytes, siblings: list[bytes]) -> bool:
    """Does `leaf` (a leaf hash) sit at `index` of the n-leaf tree with this root?"""
    try:
        return seal(n, top_from_proof(n, index, leaf, siblings)) == root
    except ProofError:
        return False
