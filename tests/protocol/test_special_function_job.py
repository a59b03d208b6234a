"""The inverse trigonometric, hyperbolic and special functions of #38 (repops/aten_special.py) in a
model as a job: compositions of the binary32 primitives, so an honest trainer's trace is the
committed graph node for node and every kernel of every node settles on chain."""
import torch

from offchain.dispute.context import Context
from offchain.protocol.dataset import write_program_job
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer

B, D = 4, 6


class Special(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(D, D), torch.nn.Linear(D, 1)

    def forward(self, x, y):
        h = self.a(x)
        u = torch.tanh(h) * 0.9
        h = torch.atan(h) + torch.asinh(h) + torch.asin(u) + torch.atanh(u) + torch.erfinv(u) + torch.atan2(h, x)
        p = h.abs() + 0.5
        h = h + torch.lgamma(p) + torch.digamma(p) * 0.1 + torch.polygamma(1, p) * 0.01 + torch.erfc(h)
        h = h + torch.special.i0e(h) + torch.special.i1(h) * 0.1 + torch.sinh(h * 0.1) + torch.cosh(h * 0.1)
        h = h + torch.log1p(p) + torch.expm1(-p) + torch.special.bessel_j0(h) + torch.special.log_ndtr(h)
        return torch.nn.functional.mse_loss(self.b(h).squeeze(-1), y)


def test_a_job_of_the_special_functions_traces_its_committed_graph_and_every_node_settles(tmp_path):
    g = torch.Generator().manual_seed(0)
    data = {"x": torch.randn(2 * B, D, generator=g), "y": torch.randn(2 * B, generator=g)}
    job = load(write_program_job(tmp_path / "job", Special(), data, list(data), steps=2, batch_size=B))
    ctx = Context(job)
    traced = Trainer(job, tmp_path / "t", "t").step_trace(0)
    assert [n.structure() for n in traced.nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []
    ops = {n.op for n in traced.nodes}
    assert {"aten.atan.default", "aten.lgamma.default", "aten.polygamma.default", "aten.erfinv.default",
            "aten.special_bessel_j0.default", "aten.atan2.default"} <= ops, ops
