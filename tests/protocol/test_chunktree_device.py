"""Chunk trees hashed where a tensor lives (repops/cuda/kernels/sha256.cu through
chunktree.nodes_on_device), run here on the CUDA emulator: the same nodes as the host's C tree
and the hashlib reference for every length around SHA-256's padding boundaries, ragged last
chunks, ZERO-padded levels and every committed dtype; and the self-check that keeps a device
whose tree differs from committing anything (tests/cuda/test_commit_gpu.py: the GPU itself)."""
import numpy as np
import pytest
import torch

from offchain.protocol import chunktree
from offchain.protocol.tensors import DTYPES, commit_sealed, read_tops, top_on_device
from repops.cuda.emulator import emulator
from test_chunktree import random_array, reference_root


@pytest.fixture(scope="module")
def rt():
    return emulator()


# (bytes, chunk bytes): messages of 55/56 and 63/64 bytes straddle SHA-256's padding, 119/120
# its two-block one; 1 chunk, a power of two, and counts that pad a level with ZERO
CASES = [(0, 4), (1, 1), (4, 4), (54, 54), (55, 55), (56, 56), (62, 62), (63, 63), (64, 64), (118, 118),
         (119, 119), (120, 120), (127, 127), (128, 128), (200, 64), (1000, 7), (1024, 1024), (4097, 1024),
         (3 * 4096 + 12, 256), (65536, 256),
         # trees of more levels than a launch hashes (chunktree.SUBTREE_LEVELS): two launches above
         # the leaves, 16 subtrees on the emulator's 2 blocks, a ZERO-padded level of 8192
         (3 * 1024, 3), (8 * 5000 + 3, 8)]


@pytest.mark.parametrize("nbytes, csize", CASES)
def test_the_device_tree_is_the_host_tree_node_for_node(rt, nbytes, csize):
    host = np.random.default_rng(nbytes * 7919 + csize).integers(0, 256, nbytes, dtype=np.uint8)
    want = chunktree.nodes(host, csize)
    assert want == chunktree.nodes_python(host.tobytes(), csize)
    assert chunktree.nodes_on_device(rt, rt.upload(host), csize) == want
    assert chunktree.nodes_on_device(rt, rt.upload(host), csize, top_only=True) == want[-32:]


@pytest.mark.parametrize("dtype", sorted(DTYPES, key=str), ids=str)
@pytest.mark.parametrize("shape, chunk", [((), 1), ((3,), 1), ((5, 7), 4), ((17, 3, 5), 16), ((1000,), 64),
                                          ((33, 33), 1024)])
def test_a_tensor_sealed_on_the_device_has_the_host_commitment(rt, dtype, shape, chunk):
    a = random_array(np.random.default_rng(len(shape) * 31 + chunk), dtype, shape)
    data = rt.upload(np.frombuffer(a.tobytes(), np.uint8))
    (root, seal), = read_tops([top_on_device(rt, data, DTYPES[dtype], a.shape, chunk)])
    want_root, want_seal = commit_sealed(torch.from_numpy(a), chunk)
    assert root == want_root == reference_root(a, chunk) and seal == want_seal


class Launches:
    """rt, counting its launches by kernel."""

    def __init__(self, rt):
        self.rt, self.launched = rt, []

    def __getattr__(self, name):
        return getattr(self.rt, name)

    def launch(self, name, grid, block, *args):
        self.launched.append(name)
        self.rt.launch(name, grid, block, *args)


@pytest.mark.parametrize("chunks", [1, 2, 512, 513, 1 << 12])
def test_a_tree_is_one_launch_for_its_leaves_and_one_per_subtree_levels_above(rt, chunks):
    """A launch a level made a 64 MB tensor's tree 17 launches, each with its host glue, and a
    traced step commits thousands of tensors."""
    counted = Launches(rt)
    data = rt.empty((chunks,), np.uint8)  # (bytes never read: one-byte chunks, values irrelevant to the count)
    chunktree.nodes_on_device(counted, data, 1, top_only=True)
    depth = (chunks - 1).bit_length()
    assert counted.launched == ["sha256_leaves"] + ["sha256_subtrees"] * -(-depth // chunktree.SUBTREE_LEVELS)


class Broken:
    """A device whose inner hashes differ in one bit (a miscompiled kernel): the self-check's case."""

    def __init__(self, rt, kernel):
        self.rt, self.kernel = rt, kernel

    def __getattr__(self, name):
        return getattr(self.rt, name)

    def launch(self, name, grid, block, *args):
        self.rt.launch(name, grid, block, *args)
        if name == self.kernel:
            args[-1][:1] ^= 1


# the first case each kernel hashes: the leaves' (its ZERO leaf too), the inner nodes' (143 chunks)
@pytest.mark.parametrize("kernel, first", [("sha256_leaves", (0, 4)), ("sha256_subtrees", (1000, 7))])
def test_the_self_check_refuses_a_device_whose_tree_differs(rt, kernel, first):
    assert chunktree.self_check(rt) is None
    assert chunktree.self_check(Broken(rt, kernel)) == first


def test_without_a_usable_gpu_cuda_tensors_are_committed_on_the_host(monkeypatch):
    chunktree._checked_device.cache_clear()
    monkeypatch.setenv("VERDE_COMMIT_ON_DEVICE", "0")
    assert chunktree.device_runtime() is None
    monkeypatch.delenv("VERDE_COMMIT_ON_DEVICE")
    if torch.cuda.is_available():
        pytest.skip("a GPU machine: tests/cuda/test_commit_gpu.py")
    with pytest.warns(RuntimeWarning, match="committed on the host"):
        assert chunktree.device_runtime() is None
    assert chunktree.device_runtime() is None  # (decided once a process)
