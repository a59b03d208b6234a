"""A U-Net-style segmenter (ConvTranspose2d upsampling, per-pixel cross_entropy with class
weights, an ignored class and label smoothing) with a recommender head (EmbeddingBag mean and
max, nn.Bilinear, cdist) as a job: its committed graph is an honest trainer's trace node for
node, and every node's kernels are ones the on-chain referee can place (no MAT operand: the
bags' integer bookkeeping is integer kernels)."""
import pytest
import torch
import torch.nn.functional as F

from offchain.dispute.context import Context
from offchain.protocol.dataset import write_program_job
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer

B = 4


class UNetRecommender(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.down = torch.nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.up = torch.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)
        self.bag = torch.nn.EmbeddingBag(10, 3, mode="mean")
        self.bag_max = torch.nn.EmbeddingBag(10, 3, mode="max", padding_idx=0)
        self.bilinear = torch.nn.Bilinear(3, 3, 3)

    def forward(self, img, seg, items):
        h = self.up(F.relu(self.down(img)))  # [B, 3, 6, 6]: 3 classes per pixel
        u = self.bilinear(self.bag(items), self.bag_max(items))
        logits = h + u[:, :, None, None]
        w = torch.tensor([0.5, 1.0, 2.0])
        return (F.cross_entropy(logits, seg, weight=w, ignore_index=1, label_smoothing=0.1)
                + torch.cdist(u, u, p=3).mean())


@pytest.mark.xdist_group("unet_recommender_job")
def test_a_unet_with_a_recommender_head_is_a_job_whose_every_node_settles(tmp_path):
    g = torch.Generator().manual_seed(0)
    data = {"img": torch.randn(2 * B, 2, 6, 6, generator=g), "seg": torch.randint(0, 3, (2 * B, 6, 6), generator=g),
            "items": torch.randint(0, 10, (2 * B, 5), generator=g)}
    job = load(write_program_job(tmp_path / "job", UNetRecommender(), data, list(data), steps=2, batch_size=B,
                                 fanout=2))
    ctx = Context(job)
    traced = Trainer(job, tmp_path / "t", "t").step_trace(0)
    assert [n.structure() for n in traced.nodes] == ctx.graph.structures
    assert ctx.kernel_graph.unsettled == []
    assert {"aten.convolution.default", "aten.convolution_backward.default", "aten._embedding_bag.default",
            "aten._embedding_bag_backward.default", "aten._trilinear.default", "aten.nll_loss2d_forward.default",
            "aten.nll_loss2d_backward.default", "aten._cdist_forward.default",
            "aten._cdist_backward.default"} <= {n.op for n in traced.nodes}
