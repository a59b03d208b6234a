"""A classifier's predictions as a Verde inference job: the CNN example's model on image arrays.

    python examples/inference/make_job.py OUT_DIR [--images images.npy] [--weights model.safetensors]
    verde train OUT_DIR/job.yaml --out outputs.safetensors   # the outputs a trainer commits, no chain

--weights: the CNN job's delivered model (`verde fetch`), or any safetensors file holding the
model's state_dict; without it the weights are fresh. Every image is classified once, in
order, --batch-size a step; the job's delivered state holds the logits as tensor `outputs`
[n, classes], row i being image i's."""
import argparse
import importlib.util
from pathlib import Path

import numpy as np
import torch

from offchain.protocol.dataset import write_inference_job
from offchain.protocol.job import JobError

_spec = importlib.util.spec_from_file_location("cnn_example", Path(__file__).resolve().parents[1] / "cnn" / "make_job.py")
cnn = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cnn)


class Predict(torch.nn.Module):
    """The classifier's logits: what an inference program returns, one row per image."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, images):
        return self.model.logits(images)


def load_weights(model: torch.nn.Module, path: str) -> None:
    """The model's tensors from a delivered state (which may hold more: folded constants)."""
    from safetensors.torch import load_file
    try:
        weights = load_file(path)
    except Exception as e:  # noqa: BLE001 - any unreadable file
        raise JobError(f"--weights {path}: not a readable safetensors file: {e}") from None
    want = model.state_dict()
    missing = sorted(k for k in want if k not in weights)
    wrong = sorted(k for k in want if k in weights and (weights[k].shape, weights[k].dtype) != (want[k].shape, want[k].dtype))
    if missing or wrong:
        raise JobError(f"--weights {path}: not this model's: missing {missing[:6]}, wrong shape or dtype {wrong[:6]}")
    model.load_state_dict({k: weights[k] for k in want})


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--images", help=".npy float32 [n, 3, H, W], n a multiple of --batch-size")
    p.add_argument("--weights", help="the model's weights, safetensors (default: fresh ones)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=8)
    a = p.parse_args()
    images = (torch.from_numpy(np.load(a.images, allow_pickle=False)).float() if a.images
              else cnn.synthetic(64)[0])
    torch.manual_seed(0)
    model = cnn.SmallCNN(a.classes)
    if a.weights:
        load_weights(model, a.weights)
    print(write_inference_job(a.out, Predict(model), {"images": images}, ["images"], batch_size=a.batch_size))


if __name__ == "__main__":
    try:
        main()
    except JobError as e:  # what is wrong with the model, the weights or the data, said without a traceback
        raise SystemExit(f"error: {e}")
