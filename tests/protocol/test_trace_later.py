"""A traced step on a GPU hashes each CUDA tensor where it lives and reads the trees' tops once
the step is over (offchain/protocol/trace.py StepRecorder.resolve): one download, instead of a
wait for the device at every op. The commitment is a format: every node, the trace root, the
end state's commitments and a fault claim are those of each tensor hashed at once, and no
stand-in is left anywhere. The GPU here is the CUDA emulator: every tensor goes through the
same sha256.cu kernels (tensors.commit_later patched to upload it first)."""
import numpy as np
import pytest
import torch

from offchain.protocol import tensors
from offchain.protocol import trace as T
from offchain.protocol.corpus import token_rows
from offchain.protocol.dataset import write_job, write_program_job
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer
from repops.cuda.emulator import emulator
from small_job import write_fault_job
from test_trace_reseal import LLAMA, Heads


@pytest.fixture
def on_emulator(monkeypatch):
    """commit_later for every tensor, on the emulated device; yields how many it hashed."""
    rt, hashed = emulator(), []

    def later(x, chunk):
        a = tensors.canonical(x)
        hashed.append(a.nbytes)
        return tensors.top_on_device(rt, rt.upload(np.frombuffer(a.tobytes(), np.uint8)), tensors.DTYPES[a.dtype],
                                     a.shape, chunk)
    monkeypatch.setattr(tensors, "commit_later", later)
    return hashed


def _step(job, d, monkeypatch, later):
    monkeypatch.setattr(T, "LATER", later)
    tr = Trainer(job, d / f"later-{later}", "t")
    st = tr._fresh_state()
    rec = tr._traced(st, 1)
    assert not rec._later  # (the trainer resolved when the step ended)
    return [n.encode() for n in rec.nodes], rec.trace_root(), [rec.commitment(t) for t in st.tensors()]


def test_a_step_whose_tops_are_read_after_it_is_the_step_hashed_at_once(tmp_path, monkeypatch, on_emulator):
    for name, job in (
            ("llama", load(write_job(tmp_path / "llama", "llama", LLAMA, {"tokens": token_rows(16, rows=16)}, steps=2,
                                     batch_size=2, fanout=2, chunk=64))),
            ("heads", load(write_program_job(tmp_path / "heads", Heads(),  # (views resealed from a stand-in)
                                             {"x": torch.randn(8, 12), "y": torch.randn(8, 12)}, ["x", "y"],
                                             steps=2, batch_size=4, chunk=8)))):
        later = _step(job, tmp_path / name, monkeypatch, True)
        assert on_emulator, "nothing went through the device's trees"
        on_emulator.clear()
        now = _step(job, tmp_path / name, monkeypatch, False)
        assert not on_emulator
        assert later == now, name


def test_a_tensor_no_op_read_is_committed_on_request_with_its_real_commitment(monkeypatch, on_emulator):
    """commitment() of a state tensor the step never read (a frozen or unused one) hashes it
    then: what it returns is the commitment, never the stand-in."""
    import repops
    from offchain.protocol.tensors import commit
    used, unused, x = torch.randn(4, 3), torch.randn(5), torch.randn(2, 3)
    rec = T.StepRecorder([used, unused], [x], chunk=4)
    with repops.deterministic(trace=rec):
        x.mul(used[:2])
    assert rec.commitment(unused) == commit(unused, 4) and rec.commitment(used) == commit(used, 4)
    assert on_emulator == [48, 24, 24, 24, 20]  # used, x, its slice, the product; unused (5 floats) when asked


def test_a_fault_traced_with_tops_read_later_is_the_same_fault_claim(tmp_path, monkeypatch, on_emulator):
    job = load(write_fault_job(tmp_path / "job"))
    claims = {}
    for later in (True, False):
        monkeypatch.setattr(T, "LATER", later)
        tr = Trainer(job, tmp_path / f"later-{later}", "t")
        claims[later] = (tr.train(), tr.fault_step, tr.faulted().fault_node())
    assert claims[True] == claims[False] and claims[True][1] == 3
