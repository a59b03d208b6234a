"""The C chunk tree (offchain/protocol/chunktree.py) against the pure-Python one, node for node:
the commitment is a format, so the fast path must give the same bytes for every dtype, shape,
chunk size (ragged last chunks, one chunk, 0 elements) and thread count."""
import numpy as np
import pytest
import torch

from offchain.protocol import chunktree, merkle
from offchain.protocol.tensors import DTYPES, Committed, TensorError, canonical, commit, commit_many, header


def reference_root(a: np.ndarray, chunk: int) -> bytes:
    """docs/PROTOCOL.md §3 spelled out with hashlib: one leaf_hash per chunk, merkle.Tree over them."""
    raw, size = a.tobytes(), chunk * a.itemsize
    tree = merkle.Tree(tuple(merkle.leaf_hash(raw[i:i + size]) for i in range(0, len(raw), size)))
    return merkle.sha256(header(DTYPES[a.dtype], a.shape), tree.root)


def random_array(rng, dtype, shape):
    if dtype == np.dtype("bool"):
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def test_the_c_path_is_built_here():
    """gcc and OpenSSL are in the toolchain: the fast path must not silently fall back."""
    assert chunktree.lib() is not None


@pytest.fixture(params=["sha-ni", "openssl"])
def compression(request):
    """Both compressions of the C path (SHA-NI only where the CPU has it)."""
    if request.param == "sha-ni" and chunktree.compression("sha-ni") != "sha-ni":
        chunktree.compression("auto")
        pytest.skip("this CPU has no SHA extensions")
    assert chunktree.compression(request.param) == request.param
    yield request.param
    chunktree.compression("auto")


SHAPES = [(), (0,), (3, 0), (1,), (7,), (5, 3), (2, 3, 4), (1000,), (257, 3), (4096,), (33, 65)]


@pytest.mark.parametrize("dtype", sorted(DTYPES, key=str), ids=str)
def test_c_tree_equals_python_tree_node_for_node(dtype, compression):
    rng = np.random.default_rng(40)
    for shape in SHAPES:
        a = canonical(random_array(rng, dtype, shape))
        for chunk in (1, 2, 3, 7, 64, 256, 2048, max(1, a.size), a.size + 1):
            csize = chunk * a.itemsize
            ref = chunktree.nodes_python(a.tobytes(), csize)
            for t in (1, 2, 3, 8):
                assert chunktree.nodes(a, csize, t, min_bytes=1) == ref, (dtype, shape, chunk, t)
            c = Committed(a, chunk)
            assert c.root == reference_root(a, chunk) == commit(a, chunk)
            ref_tree = merkle.Tree(tuple(merkle.leaf_hash(c.chunk_bytes(i)) for i in range(c.n)))
            assert c.tree.leaves == ref_tree.leaves and c.tree._levels == ref_tree._levels


def test_large_trees_split_every_level_across_threads_identically(compression):
    """Big enough that the inner levels are hashed in parallel too (>= 256 nodes a thread)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal(300_001).astype(np.float32)  # ragged last chunk, 2^11 padded leaves
    for chunk in (128, 256):
        ref = chunktree.nodes_python(a.tobytes(), chunk * 4)
        for t in (1, 2, 4, 7):
            assert chunktree.nodes(a, chunk * 4, t, min_bytes=1) == ref


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_many_trees_in_one_call_are_each_trees_bytes(compression, threads, monkeypatch):
    """commit_many (a model's state in one call, the tensors shared out among threads) = commit of
    each: every dtype, empty and 0-d tensors, views, numpy arrays, and one past the one-call size."""
    monkeypatch.setenv("VERDE_COMMIT_THREADS", str(threads))
    rng = np.random.default_rng(11)
    xs = [torch.from_numpy(canonical(random_array(rng, dtype, shape))) for dtype in sorted(DTYPES, key=str)
          for shape in SHAPES]
    xs += [torch.randn(40, 30).t(), torch.randn(9)[::2], random_array(rng, np.dtype("float32"), (5, 7)),
           torch.randn((threads << 20) // 4 + 3)]  # (the last: its own tree on every thread)
    rng.shuffle(xs)
    for chunk in (1, 7, 256):
        assert commit_many(xs, chunk) == [commit(x, chunk) for x in xs]
    for x in xs[:8]:
        a = canonical(x)
        assert chunktree.nodes_many([a, a], 7 * a.itemsize, threads) == [chunktree.nodes(a, 7 * a.itemsize)] * 2
    assert commit_many([], 4) == []


def test_many_trees_without_the_c_path_are_the_same(monkeypatch):
    xs = [torch.randn(100), torch.arange(7), torch.ones(3, dtype=torch.bool)]
    fast = commit_many(xs, 8)
    monkeypatch.setattr(chunktree, "lib", lambda: None)
    assert commit_many(xs, 8) == fast == [reference_root(canonical(x), 8) for x in xs]


def test_element_proofs_from_the_c_tree_verify():
    x = torch.randn(37, 11)
    c = Committed(canonical(x), 16)
    for i in (0, 15, 16, 200, x.numel() - 1):
        p = c.element_proof(i)
        assert p.verify(c.root) and p.element() == x.reshape(-1)[i:i + 1].numpy().tobytes()


def test_fallback_gives_the_same_roots(monkeypatch):
    """Without gcc/libcrypto the Python tree answers, with the same bytes."""
    a = np.arange(1000, dtype=np.int64)
    fast = commit(a, 64)
    monkeypatch.setattr(chunktree, "lib", lambda: None)
    assert commit(a, 64) == fast == reference_root(a, 64)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="at least one byte"):
        chunktree.nodes(np.zeros(4, np.float32), 0)
    with pytest.raises(ValueError, match="C-contiguous"):
        chunktree.nodes(np.zeros((4, 4), np.float32).T, 4)
    with pytest.raises(ValueError, match="C-contiguous"):
        chunktree.nodes_many([np.zeros(3, np.float32), np.zeros((4, 4), np.float32).T], 4)
    with pytest.raises(TensorError, match="chunk size"):
        commit_many([torch.zeros(3)], 0)
    with pytest.raises(merkle.ProofError):
        merkle.Tree.from_nodes(3, bytes(32 * 3))
