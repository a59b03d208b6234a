"""The one bisection engine. Two parties committed to sequences of a known length that
agree at `lo` and differ at `hi`; find the first index where they differ:
- nary: N-ary rounds; the parties compute (re-execute) N points per round;
- descend: Merkle descent; the parties reveal the two children of a node they disagree on.
Every answer is checked here; a bad one makes its party lose (party.Lost)."""
from __future__ import annotations

from ..protocol import merkle
from .party import Lost, Party


def points(lo: int, hi: int, n: int) -> list[int]:
    """Interior points of one round over (lo, hi): at most n - 1 distinct integers."""
    return sorted({lo + ((hi - lo) * i) // n for i in range(1, n)} - {lo, hi})


def nary(level: int, a: Party, b: Party, lo: int, hi: int, n: int, method: str, on_round=None) -> int:
    """-> the last agreed index lo (the first differing one is lo + 1)."""
    while hi - lo > 1:
        ps = points(lo, hi, n)
        got = []
        for p in (a, b):
            vals = p.ask(level, method, ps)
            if not isinstance(vals, (list, tuple)) or len(vals) != len(ps):
                raise Lost(p, level, f"{method} answered {type(vals).__name__} for {len(ps)} points")
            got.append([p.hash32(level, v, f"{method}[{i}]") for i, v in enumerate(vals)])
        if on_round:
            on_round(lo, hi, ps, got)
        for p, va, vb in zip(ps, *got):
            if va == vb:
                lo = p
            else:
                hi = p
                break
    return lo


def descend(level: int, a: Party, b: Party, n: int, roots: tuple[bytes, bytes], method: str, *args) -> int:
    """Merkle descent over two n-leaf trees whose roots differ: each party first reveals its
    top (which must seal n to its root), then children pair by pair, going left whenever
    the left children differ. -> (index of the first differing leaf, the two leaf hashes);
    the index may be >= n when a party's padding is not ZERO (the caller decides that)."""
    depth = merkle.depth(n)
    cur = []
    for p, root in zip((a, b), roots):
        top = p.hash32(level, p.ask(level, method, *args, depth, 0), "top")
        if merkle.seal(n, top) != root:
            raise Lost(p, level, f"its root does not seal a tree of {n} leaves")
        cur.append(top)
    index = 0
    for h in range(depth, 0, -1):
        kids = []
        for p, node in zip((a, b), cur):
            left = p.hash32(level, p.ask(level, method, *args, h - 1, 2 * index), "left child")
            right = p.hash32(level, p.ask(level, method, *args, h - 1, 2 * index + 1), "right child")
            if merkle.inner_hash(left, right) != node:
                raise Lost(p, level, f"children at height {h - 1}, index {2 * index} do not hash to their parent")
            kids.append((left, right))
        (la, ra), (lb, rb) = kids
        if la != lb:
            index, cur = 2 * index, [la, lb]
        else:
            index, cur = 2 * index + 1, [ra, rb]
    return index, tuple(cur)
