"""A client's own model as a Verde job: a small CNN (torch.nn) on image arrays with labels.

    python examples/cnn/make_job.py OUT_DIR [--images images.npy --labels labels.npy]
    verde train OUT_DIR/job.yaml          # the claim a trainer would commit, no chain

Without arrays it makes a synthetic 10-class set of 16x16 RGB images (a class is a
position of a bright square). The model's forward(images, labels) returns the loss: that
program (torch.export), its initial weights and the arrays are the job."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from offchain.protocol.dataset import write_program_job
from offchain.protocol.job import JobError


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, groups=2), nn.GroupNorm(4, 32), nn.ReLU(), nn.AvgPool2d(2),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(32, classes)

    def logits(self, images):
        return self.head(self.features(images).flatten(1))

    def forward(self, images, labels):
        return F.cross_entropy(self.logits(images), labels)


def synthetic(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = torch.randn(n, 3, 16, 16, generator=g) * 0.3
    for i, c in enumerate(labels.tolist()):
        r, col = divmod(c, 5)
        images[i, :, 2 + 7 * r:6 + 7 * r, 1 + 3 * col:3 + 3 * col] += 2.0
    return images, labels


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--images", help=".npy float32 [n, 3, H, W]")
    p.add_argument("--labels", help=".npy int64 [n]")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=8)
    a = p.parse_args()
    if a.images:
        images = torch.from_numpy(np.load(a.images, allow_pickle=False)).float()
        labels = torch.from_numpy(np.load(a.labels, allow_pickle=False)).long()
    else:
        images, labels = synthetic(256)
    torch.manual_seed(0)
    job = write_program_job(a.out, SmallCNN(int(labels.max()) + 1), {"images": images, "labels": labels},
                            ["images", "labels"], steps=a.steps, batch_size=a.batch_size, lr=3e-3)
    print(job)


if __name__ == "__main__":
    try:
        main()
    except JobError as e:  # what is wrong with the model or the data, said without a traceback
        raise SystemExit(f"error: {e}")
