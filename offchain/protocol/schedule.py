"""The deterministic batch schedule (docs/PROTOCOL.md §5): which dataset rows form the
batch of step t. Specified with SHA-256 only, so any party in any language reproduces it.

Rows are drawn epoch by epoch without replacement: global position p = t*B + i (i < B) is
row perm_e[p mod n] of epoch e = p // n, where perm_e is the Fisher-Yates shuffle of
0..n-1 driven by r_j = u64be(SHA-256("verde-batch" || u64be(seed) || u64be(e) || u64be(j))[:8]),
swapping j (from n-1 down to 1) with r_j mod (j + 1).
"""
from __future__ import annotations

import functools
import hashlib


@functools.lru_cache(maxsize=8)
def permutation(n: int, seed: int, epoch: int) -> tuple[int, ...]:
    perm = list(range(n))
    prefix = b"verde-batch" + seed.to_bytes(8, "big") + epoch.to_bytes(8, "big")
    for j in range(n - 1, 0, -1):
        r = int.from_bytes(hashlib.sha256(prefix + j.to_bytes(8, "big")).digest()[:8], "big")
        k = r % (j + 1)
        perm[j], perm[k] = perm[k], perm[j]
    return tuple(perm)


def batch_rows(n: int, batch: int, seed: int, step: int) -> list[int]:
    rows = []
    for p in range(step * batch, (step + 1) * batch):
        rows.append(permutation(n, seed, p // n)[p % n])
    return rows
