"""Merkle trees and tensor commitments: proofs verify, and every kind of tampering fails."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from offchain.protocol import merkle
from offchain.protocol.tensors import Committed, TensorError, canonical, commit


def leaves(n):
    return [merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(n)]


@given(st.integers(1, 70), st.data())
@settings(max_examples=60, deadline=None)
def test_every_leaf_proves_and_a_changed_anything_fails(n, data):
    tree = merkle.Tree(tuple(leaves(n)))
    i = data.draw(st.integers(0, n - 1))
    proof = tree.proof(i)
    assert len(proof) == merkle.depth(n)
    assert merkle.verify(tree.root, n, i, tree.leaves[i], proof)
    assert not merkle.verify(tree.root, n, i, merkle.leaf_hash(b"other"), proof)
    assert not merkle.verify(tree.root, n + 1, i, tree.leaves[i], proof)  # the root seals n
    if n > 1:
        j = data.draw(st.integers(0, n - 1).filter(lambda j: j != i))
        assert not merkle.verify(tree.root, n, j, tree.leaves[i], proof)
        bad = list(proof)
        k = data.draw(st.integers(0, len(bad) - 1))
        bad[k] = bytes(32) if bad[k] != bytes(32) else b"\x01" * 32
        assert not merkle.verify(tree.root, n, i, tree.leaves[i], bad)
        assert not merkle.verify(tree.root, n, i, tree.leaves[i], proof[:-1])
        assert not merkle.verify(tree.root, n, i, tree.leaves[i], proof + [bytes(32)])


def test_root_binds_the_number_of_leaves():
    """A padded tree of 3 leaves and the tree of those 3 plus an explicit zero leaf differ."""
    three = leaves(3)
    assert merkle.root_of(three) != merkle.root_of(three + [merkle.ZERO])
    assert merkle.Tree(tuple(three)).top == merkle.Tree(tuple(three + [merkle.ZERO])).top


def test_leaf_and_inner_domains_differ():
    """An inner node's preimage presented as a leaf does not hash to the inner node."""
    a, b = leaves(2)
    assert merkle.leaf_hash(a + b) != merkle.inner_hash(a, b)


def test_out_of_range_index_is_refused():
    tree = merkle.Tree(tuple(leaves(5)))
    with pytest.raises(merkle.ProofError):
        tree.proof(5)
    assert not merkle.verify(tree.root, 5, 5, tree.leaves[4], tree.proof(4))


@pytest.mark.parametrize("shape,chunk", [((), 4), ((7,), 3), ((4, 5), 4), ((3, 1, 2), 64), ((0, 3), 2)])
def test_element_proofs(shape, chunk):
    x = np.asarray(np.arange(int(np.prod(shape))).reshape(shape) * 0.5 - 3, np.float32)
    c = Committed(canonical(x), chunk)
    for i in range(x.size):
        p = c.element_proof(i)
        assert p.verify(c.root)
        assert p.element() == x.reshape(-1)[i:i + 1].tobytes()
        flipped = bytearray(p.chunk_bytes)
        flipped[0] ^= 1
        assert not type(p)(p.code, p.shape, p.chunk, p.index, bytes(flipped), p.siblings).verify(c.root)
        assert not type(p)(p.code, tuple(reversed(p.shape)) if len(set(p.shape)) > 1 else p.shape + (1,),
                           p.chunk, p.index, p.chunk_bytes, p.siblings).verify(c.root)


def test_commitment_is_layout_and_device_independent_and_value_sensitive():
    x = torch.randn(6, 5)
    assert commit(x, 4) == commit(x.t().contiguous().t(), 4) == commit(x.numpy(), 4)
    y = x.clone()
    y[2, 3] = torch.nextafter(y[2, 3], torch.tensor(float("inf")))
    assert commit(y, 4) != commit(x, 4)
    assert commit(x.reshape(5, 6), 4) != commit(x, 4)          # shape is committed
    assert commit(torch.zeros(3), 2) != commit(-torch.zeros(3), 2)  # bits, not values


def test_uncommittable_dtype_and_chunk_are_clear_errors():
    with pytest.raises(TensorError, match="float16"):
        commit(np.zeros(3, np.float16), 4)
    with pytest.raises(TensorError, match="chunk size"):
        commit(np.zeros(3, np.float32), 0)
