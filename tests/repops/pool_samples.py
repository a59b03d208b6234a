"""Samples of resampling and pooling over irregular windows (issues #38/#39: U-Nets upsample;
repops/reference/windows.py). repops_samples.SAMPLES includes them, so each runs every sample
test: close to native torch, CPU backend vs reference bit for bit on special, subnormal,
signed-zero and strided inputs, the emulated CUDA kernels, the referee's dtype and descriptor
rules, and no materialised operand (tests/protocol/test_oprun.py)."""
import torch.nn.functional as F


def _x(*shape, lo=-3.0, hi=3.0, seed=0):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


def _with_indices(pair):
    out, idx = pair
    return out + idx.float() * 0.5  # (the indices' bits are compared too, as binary32 integers)


POOL_SAMPLES = {
    "upsample_nearest_and_exact": (lambda x: F.interpolate(x, size=(7, 5)) * 2 - F.interpolate(x, size=(7, 5),
                                                                                                mode="nearest-exact"),
                                   lambda: (_x(2, 2, 3, 4),)),
    "upsample_bilinear_both_corners": (lambda x: F.interpolate(x, size=(5, 7), mode="bilinear")
                                       + F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True),
                                       lambda: (_x(2, 2, 3, 4),)),
    "upsample_bicubic": (lambda x: F.interpolate(x, size=(5, 3), mode="bicubic"), lambda: (_x(2, 2, 3, 4),)),
    "upsample_bilinear_antialias": (lambda x: F.interpolate(x, size=(3, 2), mode="bilinear", antialias=True),
                                    lambda: (_x(2, 2, 7, 5),)),
    "adaptive_avg_pool_irregular": (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), lambda: (_x(2, 2, 7, 5),)),
    "adaptive_max_pool_indices": (lambda x: _with_indices(F.adaptive_max_pool2d(x, (3, 4), return_indices=True)),
                                  lambda: (_x(2, 2, 7, 5),)),
    "max_pool_indices": (lambda x: _with_indices(F.max_pool2d(x, 3, 2, 1, return_indices=True)),
                         lambda: (_x(2, 2, 6, 5),)),
    "replication_pad_negative": (lambda x: F.pad(x, (2, -1, 1, 3), mode="replicate"), lambda: (_x(2, 3, 4, 5),)),
}
