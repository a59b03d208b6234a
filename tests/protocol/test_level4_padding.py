"""Level 4 off chain when the chunk descent ends past the last chunk: the party whose tree has
something other than ZERO there loses, in either seat (levels 2 and 3 and OperatorGame decide the
same way). A cheater controls its own chunk tree: the honest chunks with a non-ZERO padding leaf
(a chunk count not a power of two) give another commitment with the right header and chunk count,
so the descent reaches index nchunks. Before, `first_difference` made seat 0 lose there whoever
padded: with the honest trainer in seat 0 (the first poster, the tournament's champion), the honest
trainer (found by a red-team pass)."""
import types

import numpy as np
import pytest

from offchain.dispute import level4_elements
from offchain.dispute.level3_kernels import TensorDisputed
from offchain.dispute.oprun import VIEW
from offchain.dispute.party import Lost, Party
from offchain.protocol import merkle
from offchain.protocol.tensors import Committed, commit, header

CHUNK, N = 4, 12  # 3 chunks: the tree has one padding leaf


def view(n: int, source: int) -> bytes:
    return (bytes([VIEW]) + source.to_bytes(2, "big") + (0).to_bytes(8, "big", signed=True) + bytes([1])
            + n.to_bytes(8, "big") + (1).to_bytes(8, "big", signed=True))


class Tensor:
    """An endpoint answering level 4's questions about one float32 [N] tensor from a tree whose
    leaves are `leaves` (3 chunk leaves, then padding as given)."""

    def __init__(self, values: np.ndarray, padding: bytes | None):
        self.values = values
        self.head = header(1, (N,))
        chunks = [values[i:i + CHUNK].astype("<f4").tobytes() for i in range(0, N, CHUNK)]
        leaves = [merkle.leaf_hash(c) for c in chunks]
        self.tree = merkle.Tree(tuple(leaves + ([padding] if padding is not None else [])))
        self.root = merkle.seal(len(chunks), self.tree.top)
        self.commitment = merkle.sha256(self.head, self.root)
        self.honest = Committed(values.astype("<f4"), CHUNK)

    def tensor_root(self, *where):
        return self.head, self.root

    def tensor_node(self, *args):
        h, i = args[-2], args[-1]
        return self.tree.node(h, i)

    def element(self, *args):
        return self.honest.element_proof(args[-1])


@pytest.mark.parametrize("honest_seat", [0, 1])
def test_a_padded_chunk_tree_loses_at_level_4_in_either_seat(honest_seat):
    x = np.arange(N, dtype=np.float32)
    honest = Tensor(x, None)
    assert honest.commitment == commit(x, CHUNK)  # the honest tree is the protocol's
    bad = Tensor(x, merkle.leaf_hash(b"not padding"))
    assert bad.commitment != honest.commitment
    parties = [Party("honest", honest), Party("cheater", bad)]
    if honest_seat == 1:
        parties.reverse()
    a, b = parties
    t = TensorDisputed(0, 0, 0, ("output",), (a.endpoint.commitment, b.endpoint.commitment), "add",
                       [view(N, 0), view(N, 1)], [bytes(32), bytes(32)], {})
    ctx = types.SimpleNamespace(job=types.SimpleNamespace(spec=types.SimpleNamespace(chunk=CHUNK)))
    try:
        out = level4_elements.play(ctx, a, b, t)
        losers = [p.name for p in out] if isinstance(out, list) else None
    except Lost as lost:
        losers = [lost.party.name]
    assert losers == ["cheater"], f"losers: {losers} (honest in seat {honest_seat})"
