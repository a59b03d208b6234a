"""Samples of transposed convolution, the class losses, bilinear, EmbeddingBag and the distances
(issues #38/#39). repops_samples.SAMPLES includes them, so each runs every sample test (close to
native torch, CPU backend vs reference bit for bit on special, subnormal, signed-zero and strided
inputs, the emulated CUDA kernels, the referee's dtype and descriptor rules)."""
import torch
import torch.nn.functional as F
from nn_samples import _i, _x  # (seeded uniform floats, seeded class indices: one maker for both tables)


def _w(x):
    """Class weights made inside the step from the input's first row (torch takes no gradient
    for them): |x[0, c, 0...]| + 0.25."""
    return x.detach()[(0, slice(None)) + (0,) * (x.dim() - 2)].abs() + 0.25


LOSS_SAMPLES = {
    "conv_transpose2d_stride_groups": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2, dilation=(1, 2)),
        lambda: (_x(2, 4, 3, 4), _x(4, 3, 3, 2, seed=1), _x(6, seed=2))),
    "conv_transpose1d_output_padding_past_stride": (  # output_padding >= stride (dilation allows it)
        lambda x, w: F.conv_transpose1d(x, w, stride=1, output_padding=1, dilation=2),
        lambda: (_x(2, 3, 5), _x(3, 2, 3, seed=1))),
    "conv_transpose3d": (lambda x, w: F.conv_transpose3d(x, w, stride=(1, 2, 1), padding=(0, 1, 1)),
                         lambda: (_x(2, 2, 2, 3, 3), _x(2, 2, 2, 3, 2, seed=1))),
    "nll_weighted_nd_ignore_class": (
        lambda x, t: F.nll_loss(x.log_softmax(1), t, weight=_w(x), ignore_index=1),
        lambda: (_x(2, 4, 3, 2), _i(2, 3, 2, hi=4, seed=2))),
    "cross_entropy_weighted_smoothing": (
        lambda x, t: F.cross_entropy(x, t, weight=_w(x), label_smoothing=0.2, reduction="sum"),
        lambda: (_x(5, 4), _i(5, hi=4, seed=2))),
    "multi_margin_weighted_p2": (lambda x, t: F.multi_margin_loss(x, t, p=2, margin=0.7, weight=_w(x)),
                                 lambda: (_x(4, 5), _i(4, hi=5, seed=2))),
    "multilabel_margin": (lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"),
                          lambda: (_x(3, 4), torch.tensor([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 0, 0, 0]]))),
    "shrinks": (lambda x: F.hardshrink(x, 0.5) + F.softshrink(x, 1.0), lambda: (_x(4, 6),)),
    "bilinear": (lambda a, b, w, c: F.bilinear(a, b, w, c), lambda: (_x(3, 2), _x(3, 4, seed=1), _x(5, 2, 4, seed=2),
                                                                      _x(5, seed=3))),
    "embedding_bag_max_padding": (lambda w, i, o: F.embedding_bag(i, w, o, mode="max", padding_idx=2),
                                  lambda: (_x(6, 3), torch.tensor([1, 2, 4, 5, 4, 3, 2, 0]), torch.tensor([0, 4, 4]))),
    "embedding_bag_sum_weights_mean": (
        lambda w, p, i, o: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p, include_last_offset=True)
        + F.embedding_bag(i, w, o[:-1], mode="mean") + F.embedding_bag(i, w, o[:1]),  # (one bag: no later offset)
        lambda: (_x(6, 3), _x(7, seed=1), torch.tensor([1, 2, 4, 5, 4, 3, 1]), torch.tensor([0, 3, 3, 7]))),
    "norms_every_ord": (lambda a: torch.stack([torch.linalg.vector_norm(a, o) for o in (0, 3, 0.5, -1, -float("inf"))]),
                        lambda: (_x(4, 5),)),
    "cdist_pdist": (lambda a, b: torch.cdist(a, b, p=3).sum() + torch.cdist(a, b, p=1.5).sum() + F.pdist(a).sum(),
                    lambda: (_x(4, 3), _x(5, 3, seed=1))),
    "ctc_loss_varying_lengths_blank": (  # padded targets, int lengths; row 2 has no alignment (zero_infinity)
        lambda x, t: F.ctc_loss(x.log_softmax(-1), t, [6, 4, 2], [3, 1, 3], blank=4, reduction="sum",
                                zero_infinity=True),
        lambda: (_x(6, 3, 5), torch.tensor([[1, 1, 3], [2, 0, 0], [3, 1, 2]]))),
}
# every operand a view, a constant, a CAT of views or a kernel output (levels 4-5 settle any element;
# EmbeddingBag's bag of each position and the label lists' ends are integer kernels)
LOSS_NO_MAT = sorted(LOSS_SAMPLES)
