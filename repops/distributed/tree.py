"""The fixed reduction tree over micro-batch indices (docs/NUMERICS.md §11).

The sum over [lo, hi) is sum[lo, mid) + sum[mid, hi) with mid = lo + the largest power of
two below hi - lo: the left subtree is always complete, so for M a power of two the tree is
the balanced one, and every aligned block of a power-of-two size is a subtree. A rank
holding a contiguous block reduces the maximal subtrees inside it (its cover) and only those
partial sums cross the network; whoever finishes the tree adds the same pairs in the same
order, so the bits never depend on the world size."""
from __future__ import annotations

from typing import Callable


def split(lo: int, hi: int) -> int:
    """The boundary between the two children of node [lo, hi) (hi - lo >= 2)."""
    n = hi - lo
    if n < 2:
        raise ValueError(f"[{lo}, {hi}) is a leaf: it has no children")
    return lo + (1 << ((n - 1).bit_length() - 1))


def cover(m: int, lo: int, hi: int) -> list[tuple[int, int]]:
    """The maximal nodes of the tree over [0, m) inside the block [lo, hi), left to right:
    the partial sums a rank holding that block contributes."""
    if not 0 <= lo < hi <= m:
        raise ValueError(f"block [{lo}, {hi}) is not a non-empty part of [0, {m})")
    out = []

    def walk(a, b):
        if lo <= a and b <= hi:
            out.append((a, b))
        elif a < hi and lo < b:
            mid = split(a, b)
            walk(a, mid)
            walk(mid, b)
    walk(0, m)
    return out


def check_world(m: int, world: int) -> None:
    """A world size must divide M: each rank holds M / world whole micro-batches."""
    if world < 1 or m % world:
        from ..errors import DistributedError
        raise DistributedError(f"micro_batches {m}: a world size of {world} does not divide it; use one of "
                               f"{[n for n in range(1, m + 1) if m % n == 0]}, or a job with micro_batches a "
                               f"multiple of {world}")


def block(m: int, world: int, rank: int) -> tuple[int, int]:
    """The micro-batches [lo, hi) of a rank: contiguous, M / world each."""
    check_world(m, world)
    k = m // world
    return rank * k, (rank + 1) * k


class TreeSum:
    """Partial sums of the tree over [0, m), merged as soon as both children of a node are
    in: fed left to right, it holds O(log m) partials, and what remains after a block's
    leaves is exactly that block's cover. `add` combines two values (left, right)."""

    def __init__(self, m: int, add: Callable):
        self.m, self.add = m, add
        self.parts: dict[tuple[int, int], object] = {}
        self._parent: dict[tuple[int, int], tuple[int, int]] = {}

        def walk(a, b):
            if b - a >= 2:
                mid = split(a, b)
                self._parent[(a, mid)] = self._parent[(mid, b)] = (a, b)
                walk(a, mid)
                walk(mid, b)
        walk(0, m)

    def put(self, lo: int, hi: int, value) -> None:
        node = (lo, hi)
        if node != (0, self.m) and node not in self._parent:
            raise ValueError(f"[{lo}, {hi}) is not a node of the reduction tree over {self.m} micro-batches")
        if node in self.parts or any(a <= lo and hi <= b or lo <= a and b <= hi for a, b in self.parts):
            raise ValueError(f"[{lo}, {hi}) overlaps a partial sum already in")
        while node in self._parent:
            a, b = self._parent[node]
            mid = split(a, b)
            sibling = (mid, b) if node == (a, mid) else (a, mid)
            if sibling not in self.parts:
                break
            other = self.parts.pop(sibling)
            value = self.add(value, other) if node[0] < sibling[0] else self.add(other, value)
            node = (a, b)
        self.parts[node] = value

    def items(self) -> list:
        return sorted(self.parts.items())

    def root(self):
        if list(self.parts) != [(0, self.m)]:
            missing = self.m - sum(b - a for a, b in self.parts)
            raise ValueError(f"the reduction is incomplete: {missing} of {self.m} micro-batches missing")
        return self.parts[(0, self.m)]
