"""Level 4 on an EMPTY disputed tensor (0 elements, 0 chunks): there is no chunk to open, so
the referee must decide from the openings alone. The honest commitment of an empty tensor
(tensors.commit) seals the empty tree's top; a party whose opening seals anything else
loses, in either seat. (Before: the descent over 0 chunks ended "past the end" and seat 0
lost, honest or not; on chain, the honest party could never post a chunk hashing to ZERO.)"""
import numpy as np
import pytest

from offchain.dispute.level4_elements import first_difference
from offchain.dispute.party import Lost, Party
from offchain.protocol import merkle, tensors

CHUNK = 64
SHAPE = (3, 0)
HEAD = tensors.header(tensors.commit_sealed(np.zeros(SHAPE, np.float32), CHUNK)[1].code, SHAPE)


class Opening:
    """An endpoint that opens its commitment of the disputed tensor as (header, sealed root)."""

    def __init__(self, root):
        self.root = root

    def tensor_root(self, *where):
        return HEAD, self.root

    def element(self, *where):
        raise AssertionError("an empty tensor has no element to prove")


def test_the_honest_commitment_of_an_empty_tensor_is_the_empty_trees():
    commitment, seal = tensors.commit_sealed(np.zeros(SHAPE, np.float32), CHUNK)
    assert seal.chunks == merkle.seal(0, merkle.ZERO)
    assert commitment == merkle.sha256(HEAD, seal.chunks)


@pytest.mark.parametrize("cheater_seat", [0, 1])
def test_the_party_whose_empty_tensor_is_not_the_empty_tree_loses(cheater_seat):
    honest_root = merkle.seal(0, merkle.ZERO)
    cheat_root = merkle.seal(0, merkle.leaf_hash(b""))  # the same empty tensor, another top
    roots = [honest_root, cheat_root] if cheater_seat == 1 else [cheat_root, honest_root]
    parties = [Party(f"seat{i}", Opening(r)) for i, r in enumerate(roots)]
    with pytest.raises(Lost) as lost:
        first_difference(*parties, tuple(merkle.sha256(HEAD, r) for r in roots), ("output",), CHUNK, HEAD)
    assert lost.value.party is parties[cheater_seat], lost.value
    assert "empty" in lost.value.reason
