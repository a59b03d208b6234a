"""Transposed convolution, the class losses (weights, N-D inputs, an ignore_index that is a
class), the margin losses, bilinear, EmbeddingBag and the p-norms/distances under RepOps:
torch's result to rounding (forward and gradients, empty batches and unbatched inputs
included), the same bits on 1 and 2 threads, and the spec's own identities bit for bit."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import repops
from repops.models.quick_train import num_threads


def _x(*shape, seed=0, lo=-3.0, hi=3.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


def _bits(t):
    return t.detach().contiguous().view(torch.int32)


def _run(fn, inputs, threads=None):
    """fn(*inputs) and the gradients of its sum w.r.t. the float inputs, under RepOps or natively."""
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    ctx = repops.deterministic() if threads else torch.enable_grad()
    with num_threads(threads or torch.get_num_threads()), ctx:
        out = fn(*xs)
        wrt = [x for x in xs if x.requires_grad]
        grads = torch.autograd.grad(out.sum(), wrt, allow_unused=True) if out.requires_grad else []
    return out.detach(), [g if g is None else g.detach() for g in grads]


def _check(fn, *inputs, rtol=1e-4, atol=1e-5):
    """Native's result to rounding, and the same bits on 1 and 2 threads."""
    want, want_g = _run(fn, inputs)
    one, one_g = _run(fn, inputs, threads=1)
    two, two_g = _run(fn, inputs, threads=2)
    assert one.shape == want.shape and one.dtype == want.dtype
    torch.testing.assert_close(one, want, rtol=rtol, atol=atol, equal_nan=True)
    assert torch.equal(_bits(one), _bits(two))
    for a, b, c in zip(one_g, two_g, want_g):
        assert (a is None) == (c is None)
        if a is not None:
            torch.testing.assert_close(a, c, rtol=rtol, atol=atol, equal_nan=True)
            assert torch.equal(_bits(a), _bits(b))


# -- transposed convolution ------------------------------------------------------------------------------------
_CT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
# (stride, padding, output_padding, dilation, groups): output_padding < max(stride, dilation)
_GEOMETRY = [(1, 0, 0, 1, 1), (2, 1, 1, 1, 2), (3, 2, 2, 1, 1), (1, 1, 1, 2, 2), (2, 0, 2, 3, 1)]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("geometry", _GEOMETRY, ids=lambda g: "s{}p{}op{}d{}g{}".format(*g))
def test_conv_transpose_is_torchs_forward_and_backward(nd, geometry):
    stride, padding, output_padding, dilation, groups = geometry
    size = {1: 6, 2: 4, 3: 3}[nd]
    x, w, b = _x(2, 4, *[size] * nd), _x(4, 3, *[2] * nd, seed=1), _x(3 * groups, seed=2)
    _check(lambda x, w, b: _CT[nd](x, w, b, stride, padding, output_padding, groups, dilation), x, w, b)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_transpose_on_an_empty_batch_and_an_unbatched_input(nd):
    w, b = _x(4, 3, *[2] * nd, seed=1), _x(3, seed=2)
    for x in (_x(0, 4, *[3] * nd), _x(4, *[3] * nd)):
        _check(lambda x, w, b: _CT[nd](x, w, b, stride=2, padding=1, output_padding=1), x, w, b)


def test_a_transposed_convolution_is_bit_for_bit_its_convolutions_input_gradient():
    """The spec: conv_transpose(x, w) = the gradient, w.r.t. its input, of conv(z, w) at output
    gradient x (same stride, padding, dilation, groups)."""
    x, w = _x(2, 4, 3, 5), _x(4, 3, 3, 2, seed=1)
    with repops.deterministic():
        y = F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, groups=2)
        z = torch.zeros(y.shape, requires_grad=True)  # conv(z, w) has x's shape
        g, = torch.autograd.grad(F.conv2d(z, w, stride=2, padding=1, groups=2), z, grad_outputs=x)
    assert y.shape == g.shape and torch.equal(_bits(y), _bits(g))


@pytest.mark.parametrize("cls,nd", [(torch.nn.ConvTranspose1d, 1), (torch.nn.ConvTranspose2d, 2)])
def test_conv_transpose_modules_train_as_torch(cls, nd):
    torch.manual_seed(0)
    m = cls(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1)
    x = _x(3, 4, *[5] * nd)
    want = m(x)
    with repops.deterministic():
        got = m(x)
        got.sum().backward()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    grad_w = m.weight.grad.clone()
    m.zero_grad()
    m(x).sum().backward()
    torch.testing.assert_close(grad_w, m.weight.grad, rtol=1e-4, atol=1e-5)


# -- nll_loss / cross_entropy ----------------------------------------------------------------------------------
def _sequential(terms):
    s = np.float32(-0.0)
    for v in terms:
        s = np.float32(s + v)
    return s


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_nll_is_the_weighted_mean_in_row_order_bit_for_bit(reduction):
    """loss_r = -(x[r, t_r] w[t_r]); mean = (sum of loss_r in row order) / (sum of w[t_r] in row
    order); ignore_index 2 is a class: its rows count in neither sum."""
    x = _x(7, 4).log_softmax(-1)
    w = torch.tensor([0.3, 1.7, 2.0, 0.9])
    t = torch.tensor([1, 2, 3, 0, 2, 1, 3])
    with repops.deterministic():
        got = F.nll_loss(x, t, weight=w, ignore_index=2, reduction=reduction)
    xn, wn, tn = x.numpy(), w.numpy(), t.numpy()
    keep = tn != 2
    terms = [np.float32(-(xn[r, tn[r]] * wn[tn[r]])) if keep[r] else np.float32(0.0 if reduction == "none" else -0.0)
             for r in range(7)]
    if reduction == "none":
        want = np.array(terms, np.float32)
    else:
        total = _sequential([wn[tn[r]] if keep[r] else np.float32(0.0) for r in range(7)])
        want = np.float32(_sequential(terms) / total) if reduction == "mean" else _sequential(terms)
    assert (got.numpy().reshape(-1).view(np.uint32) == np.asarray(want, np.float32).reshape(-1).view(np.uint32)).all()
    torch.testing.assert_close(got, F.nll_loss(x, t, weight=w, ignore_index=2, reduction=reduction))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 3), (2, 4, 3, 2), (2, 4, 2, 1, 3), (4,), (0, 4), (0, 4, 3)],
                         ids=str)
def test_cross_entropy_with_weights_nd_ignored_class_and_smoothing_is_torchs(shape, reduction):
    x = _x(*shape)
    classes = shape[1] if len(shape) > 1 else shape[0]
    tshape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    t = torch.randint(0, classes, tshape, generator=torch.Generator().manual_seed(1))
    w = _x(classes, seed=2, lo=0.1, hi=2.0)
    for kwargs in ({"weight": w}, {"weight": w, "ignore_index": 1}, {"ignore_index": 0, "label_smoothing": 0.3},
                   {"weight": w, "label_smoothing": 0.1}):
        _check(lambda x: F.cross_entropy(x, t, reduction=reduction, **kwargs), x)


def test_cross_entropy_with_probabilities_as_targets_is_torchs():
    x, p = _x(4, 5), _x(4, 5, seed=1).softmax(-1)
    _check(lambda x: F.cross_entropy(x, p, weight=torch.tensor([0.5, 1.0, 2.0, 1.5, 0.2]), label_smoothing=0.2), x)


def test_an_out_of_range_class_is_the_index_fault_and_the_ignore_rows_get_no_gradient():
    x = _x(5, 3, 2).log_softmax(1).requires_grad_()
    t = torch.tensor([[0, 1], [1, 1], [2, 0], [1, 2], [0, 0]])
    with repops.deterministic():
        F.nll_loss(x, t, weight=torch.tensor([1.0, 2.0, 0.5]), ignore_index=1).backward()
    assert (x.grad.permute(0, 2, 1)[t == 1] == 0).all()
    with pytest.raises(repops.errors.RepOpsError, match="index 3"), repops.deterministic():
        F.nll_loss(x, torch.tensor([[0, 1], [1, 1], [3, 0], [1, 2], [0, 0]]))


# -- margin losses, shrink gradients, bilinear ----------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_margin_losses_are_torchs(reduction):
    x, t = _x(4, 5), torch.tensor([0, 4, 2, 2])
    for p, margin, w in ((1, 1.0, None), (2, 0.6, _x(5, seed=1, lo=0.1, hi=2.0))):
        _check(lambda x: F.multi_margin_loss(x, t, p=p, margin=margin, weight=w, reduction=reduction), x)
    _check(lambda x: F.multi_margin_loss(x, torch.tensor(3), reduction=reduction), _x(5))  # unbatched
    labels = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 0, 0, 0, 0], [4, 4, -1, 0, 0]])
    _check(lambda x: F.multilabel_margin_loss(x, labels, reduction=reduction), x)
    _check(lambda x: F.multilabel_margin_loss(x, labels[0], reduction=reduction), _x(5))
    empty = (_x(0, 5), torch.zeros(0, dtype=torch.long), torch.zeros(0, 5, dtype=torch.long))
    if reduction == "none":
        _check(lambda x: F.multi_margin_loss(x, empty[1], reduction=reduction), empty[0])
        _check(lambda x: F.multilabel_margin_loss(x, empty[2], reduction=reduction), empty[0])
        return
    # an empty batch reduced: torch returns uninitialised memory (its loop never writes the
    # total); RepOps the empty fold, -0 summed and -0/0 = NaN for the mean (as nll_loss)
    with repops.deterministic():
        got = [F.multi_margin_loss(*empty[:2], reduction=reduction),
               F.multilabel_margin_loss(empty[0], empty[2], reduction=reduction)]
    for v in got:
        assert v.isnan() if reduction == "mean" else (v == 0 and v.signbit())


def test_shrink_gradients_and_bilinear_are_torchs():
    x = torch.tensor([-2.0, -0.5, -0.25, 0.0, 0.5, 0.7, float("nan"), 3.0])
    _check(lambda x: F.hardshrink(x, 0.5) * 3 + F.softshrink(x, 0.5), x)
    a, b, w, bias = _x(6, 3), _x(6, 4, seed=1), _x(5, 3, 4, seed=2), _x(5, seed=3)
    _check(F.bilinear, a, b, w, bias)
    _check(F.bilinear, _x(0, 3), _x(0, 4), w, bias)
    _check(F.bilinear, _x(3), _x(4), w)  # unbatched


# -- EmbeddingBag ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_bag_is_torchs_with_empty_bags_padding_and_last_offset(mode, padding_idx):
    w = _x(8, 4)
    i = torch.tensor([1, 3, 4, 5, 4, 3, 3, 7, 0, 3])
    for offsets, last in ((torch.tensor([0, 4, 4, 9]), False), (torch.tensor([0, 2, 2, 6, 10]), True)):
        _check(lambda w: F.embedding_bag(i, w, offsets, mode=mode, padding_idx=padding_idx,
                                         include_last_offset=last), w)
    _check(lambda w: F.embedding_bag(i.reshape(2, 5), w, mode=mode, padding_idx=padding_idx), w)  # 2-D: bags are rows


def test_embedding_bag_per_sample_weights_get_their_gradient():
    w, p = _x(8, 4), _x(10, seed=1)
    i, o = torch.tensor([1, 3, 4, 5, 4, 3, 3, 7, 0, 3]), torch.tensor([0, 4, 4, 9])
    _check(lambda w, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p, padding_idx=4), w, p)


def test_an_overflowing_weighted_row_is_the_domain_fault_not_nan_in_other_bags():
    """Finite rows and per_sample_weights whose product overflows (forward), or a finite gradient
    times a finite weight that does (backward): the inf's NaN would reach every other bag or row
    through the one-hot sum (torch keeps the inf in its own), so each is the domain fault."""
    i, o = torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2])
    w = torch.tensor([[1.0, 2e10], [3.0, 4.0], [5.0, 6.0]])
    with pytest.raises(repops.errors.DomainFault, match="not finite"), repops.deterministic():
        F.embedding_bag(i, w, o, mode="sum", per_sample_weights=torch.tensor([1e30, 1.0, 1.0]))
    w = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    g = torch.tensor([[1e10, 1.0], [1.0, 1e10], [1.0, 1.0]])
    with pytest.raises(repops.errors.DomainFault, match="not finite"), repops.deterministic():
        F.embedding_bag(i, w, o, mode="sum", per_sample_weights=torch.tensor([1.0, 1e30, 1.0])).backward(g)


def test_embedding_bag_max_takes_the_first_maximum_and_sparse_gradients_are_refused():
    w = torch.tensor([[1.0, 2.0], [1.0, 5.0], [0.5, 5.0]], requires_grad=True)
    with repops.deterministic():
        y = F.embedding_bag(torch.tensor([0, 1, 2]), w, torch.tensor([0]), mode="max")
        y.sum().backward()
    assert y.tolist() == [[1.0, 5.0]]
    assert w.grad.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]  # ties: the first position, as torch
    with pytest.raises(repops.errors.UnsupportedOpError, match="sparse"), repops.deterministic():
        F.embedding_bag(torch.tensor([0, 1]), w, torch.tensor([0]), sparse=True).sum().backward()


# -- p-norms and distances ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ord", [0, 0.5, 1.5, 3, -1, -2.5, float("inf"), -float("inf")])
def test_vector_norm_of_every_ord_is_torchs(ord):
    x = _x(4, 6)
    _check(lambda x: torch.linalg.vector_norm(x, ord, dim=-1), x)
    _check(lambda x: torch.linalg.vector_norm(x, ord, dim=(0, 1), keepdim=True), x)
    _check(lambda x: F.normalize(x, p=ord if ord > 0 else 2.0, dim=0), x)


@pytest.mark.parametrize("p", [0, 1, 1.5, 0.5, 2, 3, float("inf")])
def test_cdist_and_pdist_are_torchs(p):
    a, b = _x(2, 5, 3), _x(2, 4, 3, seed=1)
    a[0, 1] = b[0, 2]  # a zero distance: the gradient's 0/0 rule
    _check(lambda a, b: torch.cdist(a, b, p=p), a, b)
    _check(lambda a: F.pdist(a, p=p), _x(5, 3))
    _check(lambda a, b: torch.cdist(a, b, p=p), _x(0, 3), b[0])


# -- F.linear_cross_entropy's chunked path --------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_chunked_linear_cross_entropy_is_torchs_and_its_none_form_is_refused(reduction):
    opts = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=3)
    x, W, b, t = _x(7, 5), _x(4, 5, seed=1), _x(4, seed=2), torch.tensor([0, 3, 1, 1, 2, 3, 0])
    w = _x(4, seed=3, lo=0.1, hi=2.0)
    for kwargs in ({}, {"weight": w, "ignore_index": 1}, {"ignore_index": 3}):
        _check(lambda x, W, b: F.linear_cross_entropy(x, W, t, linear_bias=b, reduction=reduction, options=opts,
                                                      **kwargs), x, W, b)
    with pytest.raises(repops.errors.UnsupportedOpError, match="reduction='none'"), repops.deterministic():
        F.linear_cross_entropy(x, W, t, reduction="none", options=opts)


@pytest.mark.parametrize("offsets,last,rule", [([0, 5, 3], False, "must not decrease"), ([1, 3], False, "first offset"),
                                               ([0, 3, 6], True, "include_last_offset"), ([0, 3, 9], False, "index 9")])
def test_embedding_bag_offsets_torch_rejects_or_gets_wrong_are_the_index_fault(offsets, last, rule):
    """A decreasing or out-of-range offset, a first one other than 0 (torch raises); a last one
    short of the indices with include_last_offset (torch's sum and mean then disagree)."""
    w = _x(6, 2)
    with pytest.raises(repops.errors.IndexFault, match=rule), repops.deterministic():
        F.embedding_bag(torch.tensor([1, 2, 3, 4, 5, 0, 1]), w, torch.tensor(offsets), include_last_offset=last)


def test_arguments_torch_rejects_are_rejected_not_computed():
    """RepOps replaces the aten kernel, where torch keeps these checks: each is an error, never a result."""
    x, w, xr, wc, y = _x(2, 4, 5, 5), _x(4, 3, 3, 3), _x(2, 4, 3, 3), _x(3, 4, 3, 3), _x(3, 4)
    bad = [lambda: F.conv_transpose2d(x, w, stride=1, output_padding=1),   # output_padding >= stride and dilation
           lambda: F.conv_transpose2d(x, w, padding=-1), lambda: F.conv2d(x, wc, padding=-1),
           lambda: F.conv_transpose2d(x, w, groups=3), lambda: F.conv_transpose2d(x, w, padding=4),
           lambda: F.nll_loss(xr, torch.zeros(2, 3, 2, dtype=torch.long)),
           lambda: F.nll_loss(y, torch.tensor([0, 1, 2]), weight=torch.ones(5)),
           lambda: F.multi_margin_loss(y, torch.tensor([0, 1])),
           lambda: F.multilabel_margin_loss(y, torch.tensor([[0, 1, 2, -1]] * 2))]
    for fn in bad:
        with pytest.raises(RuntimeError):  # torch's
            fn()
        with pytest.raises((repops.errors.UnsupportedOpError, repops.errors.IndexFault)), repops.deterministic():
            fn()
