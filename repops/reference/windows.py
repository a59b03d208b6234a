"""Windows that are not one strided view, as kernels a referee can follow (docs/NUMERICS.md
§8, "Upsampling, adaptive pooling, pooling indices, replication padding"): the machinery of
repops/reference/resample.py and pooling.py.

Each spatial axis has a TABLE, fixed by the sizes alone: a tuple of slots, each a tuple over
the positions of the axis being made of (role, j) or None, "read position j of source `role`
along this axis, or nothing". A forward reads one source (role 0): nearest and replication
pad one slot (the source position), linear two (the corners x0, x1), a pooling window one
per offset in it. Its transpose (`transpose`) lists, for each input position, the outputs
that read it, in increasing (output, slot) order: the order the backward sums them in.

`take` makes one slot of one axis as ONE copy kernel whose operand is a CAT of views (a
`prims.place`; a plain view when one arithmetic run covers the axis), and `staged` takes the
axes in turn; a window is then folded over its slots in row-major order. So every float
operand is a view, a constant or a CAT of views (levels 4-5 settle any element), and every
input element of a backward (`scatter_back`) sums its contributions from +0 in increasing
row-major output order, as torch's CPU loops add them. Tables and their runs are cached by
size (host work once per shape, not per step)."""
from __future__ import annotations

import functools
import itertools

import numpy as np

from . import prims as P
from .fold import SUM_INIT


@functools.cache
def transpose(table, n_in: int):
    """The backward's table of a forward table of role-0 entries: for input position j, slot p
    is its p-th reader (slot a of the forward, output o) in increasing (o, a) order, as (a, o)."""
    readers = [[] for _ in range(n_in)]
    n_out = len(table[0]) if table else 0
    for o in range(n_out):
        for a, slot in enumerate(table):
            if slot[o] is not None:
                readers[slot[o][1]].append((a, o))
    depth = max((len(r) for r in readers), default=0)
    return tuple(tuple(r[p] if p < len(r) else None for r in readers) for p in range(depth))


# -- the kernels ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _runs(entries: tuple):
    """Pieces (start, step, width, role, j0, dj) covering the defined entries: from the first
    position not yet covered, the longest arithmetic run (in position and in j, one role) among
    the next few candidates for its second element."""
    left = {i: e for i, e in enumerate(entries) if e is not None}
    order = sorted(left)
    pieces = []
    for n, i0 in enumerate(order):
        if i0 not in left:
            continue
        r, j0 = left.pop(i0)
        best = (1, 1, 0)
        for i1 in list(itertools.islice((i for i in itertools.islice(order, n + 1, None) if i in left), 8)):
            if left[i1][0] != r:
                continue
            step, dj, w = i1 - i0, left[i1][1] - j0, 1
            while left.get(i0 + w * step) == (r, j0 + w * dj):
                w += 1
            if w > best[0]:
                best = (w, step, dj)
        w, step, dj = best
        for t in range(1, w):
            del left[i0 + t * step]
        pieces.append((i0, step, w, r, j0, dj))
    return tuple(pieces)


def _along(a, axis: int, j0: int, dj: int, width: int):
    """Positions j0, j0 + dj, ... (width of them) of `a` along axis, as a view."""
    at = [slice(None)] * a.ndim
    if dj == 0 or width == 1:
        at[axis] = slice(j0, j0 + 1)
        v = a[tuple(at)]
        shape = list(v.shape)
        shape[axis] = width
        return v if width == 1 else P.xp_of(a).broadcast_to(v, tuple(shape))
    stop = j0 + dj * (width - 1) + (1 if dj > 0 else -1)
    at[axis] = slice(j0, stop if stop >= 0 else None, dj)
    return a[tuple(at)]


def take(sources: dict, axis: int, entries, background, kernel=None):
    """sources: role -> array. The array whose position i along `axis` is sources[r]'s position
    j for entries[i] = (r, j), else `background`: one copy kernel (`kernel`: of another dtype)
    over a CAT of views, or the view itself when one run covers every position."""
    first = next(iter(sources.values()))
    shape = list(first.shape)
    shape[axis] = len(entries)
    pieces = _runs(tuple(entries))
    if len(pieces) == 1 and pieces[0][:3] == (0, 1, len(entries)):
        _, _, w, r, j0, dj = pieces[0]
        return _along(sources[r], axis, j0, dj, w)
    if not pieces:
        return P.const(background, shape, first.dtype)
    return P.place(shape, axis, [(s, st, _along(sources[r], axis, j0, dj, w)) for s, st, w, r, j0, dj in pieces],
                   background, kernel)


def staged(sources: dict, tables, axes, background, kernel=None) -> dict:
    """sources: role tuple (one role per axis) -> array. Takes the axes in turn (`take`), each
    slot of each: -> slot tuple -> array with every axis made."""
    cur = {((), roles): a for roles, a in sources.items()}
    for table, axis in zip(tables, axes):
        nxt = {}
        groups: dict = {}
        for (slots, roles), a in cur.items():
            groups.setdefault((slots, roles[1:]), {})[roles[0]] = a
        for (slots, rest), by_role in groups.items():
            for p, entries in enumerate(table):
                nxt[(slots + (p,), rest)] = take(by_role, axis, entries, background, kernel)
        cur = nxt
    return {slots: a for (slots, _), a in cur.items()}


def gather(x, tables):
    """x read by one single-slot table per trailing axis (nearest, replication padding): the
    axes' copy kernels in turn, and a copy kernel where every table read x as it is (a view)."""
    (y,) = staged({(0,) * len(tables): x}, tables, _axes(x, len(tables)), 0.0).values()
    return P.copy(y) if y.base is not None or y is x else y


def _fold(prim, terms: dict, init, shape):
    acc = P.const(init, shape)
    for key in sorted(terms):
        acc = prim(acc, terms[key])
    return acc if terms else P.copy(acc)


def _axes(x, nd: int):
    return list(range(x.ndim - nd, x.ndim))


def scatter_back(sources: dict, tables, in_sizes, lead) -> np.ndarray:
    """The backward of a gather by these forward tables: sources maps each forward role tuple
    (slot per axis) to the gradient it carries, [*lead, *out]; each input element sums what it
    received from +0, in increasing row-major (output, slot) order (missing slots read -0)."""
    nd = len(tables)
    back = [transpose(t, n) for t, n in zip(tables, in_sizes)]
    any_src = next(iter(sources.values()))
    terms = staged(sources, back, _axes(any_src, nd), SUM_INIT)
    return _fold(P.add, terms, 0.0, tuple(lead) + tuple(in_sizes))
