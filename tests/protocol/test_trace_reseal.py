"""A traced step commits a view's or reshape's output by resealing its input's chunk
tree under the new shape (offchain/protocol/trace.py SAME_BYTES), not by hashing the bytes
again. The commitment is a format: every node of a traced step must be the node it was with
every output hashed, and the shortcut must really skip the hashing."""
import torch

from offchain.protocol import trace as T
from offchain.protocol.corpus import token_rows
from offchain.protocol.dataset import write_job, write_program_job
from offchain.protocol.jobfile import load
from offchain.protocol.tensors import commit, commit_sealed
from offchain.trainer import Trainer

LLAMA = {"vocab": 256, "d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 64, "max_seq": 16}


def _traced_nodes(job, d, monkeypatch, reseal):
    """(node leaves, trace root, bytes hashed, ops) of step 1 traced with or without the shortcut."""
    monkeypatch.setattr(T, "RESEAL", reseal)
    tr = Trainer(job, d / f"reseal-{reseal}", "t")
    rec = tr._traced(tr._fresh_state(), 1)
    return [n.leaf() for n in rec.nodes], rec.trace_root(), rec.hashed, [n.op for n in rec.nodes]


class Heads(torch.nn.Module):
    """views, reshapes, unsqueeze/squeeze, flatten and a detached target: the shapes a model moves through."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(12, 12)

    def forward(self, x, y):
        h = self.fc(x).view(-1, 3, 4).unsqueeze(1).flatten(2).squeeze(1).reshape(-1, 12)
        return torch.nn.functional.mse_loss(h, y.detach().clone().view(-1, 12))


def test_a_seal_under_another_shape_is_the_commitment_of_the_same_bytes():
    x = torch.randn(6, 5, 7)
    root, seal = commit_sealed(x, 16)
    assert root == commit(x, 16)
    for shape in ((210,), (6, 35), (1, 6, 5, 7, 1)):
        assert seal.commitment(shape) == commit(x.reshape(shape), 16)
    assert seal.commitment((7, 5, 6)) != commit(x.permute(2, 1, 0), 16)  # (a transpose moves the bytes)


def test_a_traced_step_s_nodes_are_the_same_with_views_resealed(tmp_path, monkeypatch):
    for name, job in (
            ("llama", load(write_job(tmp_path / "llama", "llama", LLAMA, {"tokens": token_rows(16, rows=16)}, steps=2,
                                     batch_size=2, fanout=2, chunk=64))),
            ("heads", load(write_program_job(tmp_path / "heads", Heads(),
                                             {"x": torch.randn(8, 12), "y": torch.randn(8, 12)}, ["x", "y"],
                                             steps=2, batch_size=4, chunk=8)))):
        fast, root, fast_bytes, ops = _traced_nodes(job, tmp_path / name, monkeypatch, True)
        slow, slow_root, slow_bytes, _ = _traced_nodes(job, tmp_path / name, monkeypatch, False)
        assert fast == slow and root == slow_root, name
        assert any(op in T.SAME_BYTES for op in ops), name
        assert fast_bytes < slow_bytes, (name, fast_bytes, slow_bytes)


def test_the_transpose_of_a_transposed_tensor_is_its_commitment_unhashed_until_written():
    """t(t(W)) (what a linear layer's backward reads) holds W's bytes row-major: W's commitment,
    nothing hashed; after an in-place write to W, W's new commitment. Every commitment is the
    one of the bytes its tensor holds."""
    import repops
    w, x = torch.randn(6, 4), torch.randn(1, 4)
    w0 = w.clone()
    rec = T.StepRecorder([w], [x], chunk=8)
    with repops.deterministic(trace=rec):
        w.t().t().mul(x)
        hashed = rec.hashed
        w.mul_(2.0)
        w.t().t().mul(x)
    assert [n.op for n in rec.nodes] == ["aten.t.default", "aten.t.default", "aten.mul.Tensor", "aten.mul_.Tensor",
                                         "aten.t.default", "aten.t.default", "aten.mul.Tensor"]
    assert rec.nodes[1].outputs[0] == commit(w0, 8) != rec.nodes[5].outputs[0] == commit(w, 8)
    assert rec.nodes[0].outputs[0] == commit(w0.t(), 8) and rec.nodes[4].outputs[0] == commit(w.t(), 8)
    n = w.numel() * 4
    assert hashed == n + n + x.numel() * 4 + n  # W (read), t(W), x, the product: t(t(W)) not hashed
    assert rec.hashed - hashed == n + n + n  # W written, its t, the product: t(t(W)) not hashed
    assert rec.hashed_by == {"state and data": n + x.numel() * 4, "aten.t.default": 2 * n, "aten.mul.Tensor": 2 * n,
                             "aten.mul_.Tensor": n}
