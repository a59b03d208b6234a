"""RepOps' own operators (repops/ops.py) equal the compositions they replace bit for bit,
forward and backward, and run natively too; the models that use them train reproducibly."""
import contextlib

import pytest
import torch

import repops
from repops.ops import _rotate, adamw_, adamw_foreach_, attention, rms_norm, rope


def bits(t):
    return t.detach().contiguous().view(torch.int32)


def _run(f, inputs, backend="cpu", seed=1):
    xs = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    with repops.deterministic(backend):
        y = f(*xs)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed))  # RNG stays outside RepOps
    with repops.deterministic(backend):
        y.backward(g)
    return [y] + [x.grad for x in xs if x.requires_grad]


def _rms_plain(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


def _att_plain(mask, scale=8 ** -0.5):
    def f(q, k, v):
        s = (q @ k.transpose(-2, -1)) * scale
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return torch.softmax(s, -1) @ v
    return f


@pytest.mark.parametrize("backend", ["cpu", "reference", "cuda-emu"])
def test_rms_norm_equals_the_composition(backend):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 5, 8, generator=g), torch.randn(8, generator=g)
    x.view(-1)[::7] = 0.0
    a = _run(_rms_plain, [x, w], backend)
    b = _run(lambda x, w: rms_norm(x, w, 1e-5), [x, w], backend)
    assert all(torch.equal(bits(p), bits(q)) for p, q in zip(a, b))


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("backend", ["cpu", "reference", "cuda-emu"])
def test_attention_equals_the_composition(backend, masked):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 6, 8, generator=g) for _ in range(3))
    mask = torch.triu(torch.ones(6, 6, dtype=torch.bool), 1) if masked else None
    a = _run(_att_plain(mask), [q, k, v], backend)
    b = _run(lambda q, k, v: attention(q, k, v, mask, 8 ** -0.5), [q, k, v], backend)
    assert all(torch.equal(bits(p), bits(x)) for p, x in zip(a, b))


def _rope_inputs(seed=4):
    """x as the model's q (a head-split view, transposed) holding zeros of both signs, NaN,
    infinities and a subnormal; tables with zeros of both signs; an output gradient with
    zeros of both signs (the composition turns a -0 input gradient into +0)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 7, 3, 8, generator=g)
    flat = x.view(-1)
    flat[::5], flat[1::11] = 0.0, -0.0
    flat[3], flat[7], flat[9], flat[13] = float("nan"), float("inf"), float("-inf"), 1e-40
    cos, sin = torch.randn(7, 4, generator=g), torch.randn(7, 4, generator=g)
    sin[1, 1], cos[2, 2], sin[3, 0] = 0.0, -0.0, -0.0
    gy = torch.randn(2, 3, 7, 8, generator=g)
    gy.view(-1)[::3], gy.view(-1)[1::7] = -0.0, 0.0
    return x, cos, sin, gy


@pytest.mark.parametrize("backend", ["cpu", "reference", "cuda-emu"])
def test_rope_equals_the_composition(backend):
    x, cos, sin, gy = _rope_inputs()
    got = []
    for f in (_rotate, rope):
        xx = x.clone().requires_grad_()
        with repops.deterministic(backend):
            y = f(xx.transpose(1, 2), cos, sin)
            y.backward(gy)
        got.append((y, xx.grad))
    (y0, g0), (y1, g1) = got
    assert torch.equal(bits(y0), bits(y1)) and torch.equal(bits(g0), bits(g1))


def test_a_trace_sees_rope_as_one_node_each_way():
    x, cos, sin, gy = _rope_inputs()
    xx = x.clone().requires_grad_()
    seen = []
    with repops.deterministic("cpu", trace=lambda func, args, kwargs, out: seen.append(str(func))):
        rope(xx.transpose(1, 2), cos, sin).backward(gy)
    assert [f for f in seen if "rope" in f] == ["repops.rope.default", "repops.rope_backward.default"]
    assert not any(f.startswith(("aten.mul", "aten.sub", "aten.add", "aten.stack")) for f in seen), seen


def test_rope_tables_that_take_a_gradient_get_the_compositions_gradient():
    """Learned frequencies: the composition runs (its autograd reaches the tables), never a
    fused op that would give them no gradient."""
    x, cos, sin, gy = _rope_inputs()
    grads = []
    for f in (_rotate, rope):
        c, s = cos.clone().requires_grad_(), sin.clone().requires_grad_()
        with repops.deterministic("cpu"):
            f(x.transpose(1, 2), c, s).backward(gy)
        grads.append((c.grad, s.grad))
    assert all(t is not None for t in grads[1])
    assert all(torch.equal(bits(a), bits(b)) for a, b in zip(*grads))


def test_the_rope_op_itself_refuses_to_drop_its_tables_gradient():
    x, cos, sin, gy = _rope_inputs()
    c = cos.clone().requires_grad_()
    with repops.deterministic("cpu"):
        y = torch.ops.repops.rope(x.transpose(1, 2), c, sin)
        with pytest.raises(repops.UnsupportedOpError, match="no gradient: call repops.ops.rope"):
            y.backward(gy)


@pytest.mark.parametrize("backend", [None, "cpu", "cuda-emu"])
def test_rope_refuses_an_odd_last_axis_and_tables_that_do_not_fit(backend):
    ctx = (lambda: repops.deterministic(backend)) if backend else contextlib.nullcontext
    odd, table3, x, table4, sin = torch.randn(2, 5, 7), torch.randn(5, 3), torch.randn(2, 5, 8), torch.randn(4, 4), \
        torch.randn(5, 4)
    with ctx(), pytest.raises(ValueError, match="even last axis"):
        rope(odd, table3, table3)
    with ctx(), pytest.raises(ValueError, match=r"cos of shape \[4, 4\] does not broadcast to x's pairs \[2, 5, 4\]"):
        rope(x, table4, sin)


def test_outside_repops_the_ops_are_plain_torch_and_a_programs_export_keeps_them_fused():
    """No custom op's dispatch outside RepOps (native torch's speed, the baseline RepOps is
    measured against); a job program's export (RepOps' function mode) records the fused nodes."""
    from repops.mode import RepOpsFunctions

    class M(torch.nn.Module):
        def forward(self, x, w, cos, sin, q):
            return rope(rms_norm(x, w, 1e-5), cos, sin), attention(q, q, q, None, 0.5)
    args = (torch.randn(3, 8), torch.randn(8), torch.randn(3, 4), torch.randn(3, 4), torch.randn(2, 3, 4))

    def targets(ep):
        return {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    plain = targets(torch.export.export(M(), args, strict=False))
    with RepOpsFunctions():
        fused = targets(torch.export.export(M(), args, strict=False))
    assert not [t for t in plain if t.startswith("repops.")], plain
    assert {"repops.rms_norm.default", "repops.rope.default", "repops.attention.default"} <= fused, fused


def _adamw_plain(p, g, m, v, b1t, b2t, lr, b1, b2, eps, wd):
    p.mul_(1.0 - lr * wd)
    m.lerp_(g, 1.0 - b1)
    v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
    b1t.mul_(b1)
    b2t.mul_(b2)
    step = torch.div(torch.full((), lr, dtype=torch.float32), torch.rsub(b1t, 1.0))
    p.sub_(torch.mul(torch.div(m, torch.add(torch.div(v.sqrt(), torch.rsub(b2t, 1.0).sqrt()), eps)), step))


@pytest.mark.parametrize("backend", ["cpu", "reference", "cuda-emu"])
def test_adamw_step_equals_the_composition(backend):
    g = torch.Generator().manual_seed(2)
    ts = [torch.randn(300, generator=g) for _ in range(3)] + [torch.rand(300, generator=g), torch.ones(()), torch.ones(())]
    a, b = [t.clone() for t in ts], [t.clone() for t in ts]
    with repops.deterministic(backend):
        for _ in range(3):
            _adamw_plain(a[0], a[1], a[2], a[3], a[4], a[5], 3e-3, 0.9, 0.999, 1e-8, 0.01)
            adamw_(b[0], b[1], b[2], b[3], b[4], b[5], 3e-3, 0.9, 0.999, 1e-8, 0.01)
    assert all(torch.equal(bits(x), bits(y)) for x, y in zip(a, b))


def _group(n=37):
    """A group of more parameters than one multi-tensor launch takes, sizes 0 to 700."""
    g = torch.Generator().manual_seed(3)
    sizes = [0, 1, 700] + torch.randint(1, 90, (n - 3,), generator=g).tolist()
    return [[torch.randn(k, generator=g) for k in sizes], [torch.randn(k, generator=g) for k in sizes],
            [torch.randn(k, generator=g) for k in sizes], [torch.rand(k, generator=g) for k in sizes],
            [torch.full((), 0.9 ** (i % 4)) for i in range(n)], [torch.full((), 0.999 ** (i % 3)) for i in range(n)]]


@pytest.mark.parametrize("backend", ["cpu", "reference", "cuda-emu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_adamw_group_step_is_each_parameters_step(backend):
    """adamw_foreach_ untraced (the CUDA backend: its multi-tensor kernels; on a GPU, on CUDA
    tensors) = adamw_ on each parameter (on the GPU: the CPU's)."""
    device = "cpu"
    if backend == "cuda":
        from kernel_samples import backend_table
        backend_table("cuda")  # skips without a device
        backend, device = "cpu", "cuda"  # (CUDA tensors run on the CUDA backend)
    b = _group()
    a = [[t.to(device) for t in ts] for ts in b]
    for _ in range(2):
        with repops.deterministic(backend):
            adamw_foreach_(*a, 3e-3, 0.9, 0.999, 1e-8, 0.01)
        with repops.deterministic(backend if device == "cpu" else "cpu"):
            for ts in zip(*b):
                adamw_(*ts, 3e-3, 0.9, 0.999, 1e-8, 0.01)
    for x, y in zip(a, b):
        assert all(torch.equal(bits(p.cpu()), bits(q)) for p, q in zip(x, y))


def test_a_trace_sees_the_group_step_as_each_parameters_adamw():
    """The protocol's graph has one node per parameter: a trace records adamw_ per parameter,
    in order, on its own tensors, never the group op."""
    a = _group(5)
    seen = []
    with repops.deterministic("cpu", trace=lambda func, args, kwargs, out: seen.append((str(func), args[0]))):
        adamw_foreach_(*a, 3e-3, 0.9, 0.999, 1e-8, 0.01)
    assert [f for f, _ in seen] == ["repops.adamw_.default"] * 5
    assert all(t is p for (_, t), p in zip(seen, a[0]))


def test_a_model_on_two_devices_steps_each_parameter_where_it_lives():
    """One group op runs on one device: parameters on two (meta stands in for a second) step
    one by one, each with its own state, as before the group op."""
    from repops.optim import AdamW
    ps = [torch.nn.Parameter(torch.randn(4)), torch.nn.Parameter(torch.randn(3, device="meta"))]
    opt = AdamW(ps, lr=1e-3)
    for p in ps:
        p.grad = torch.ones_like(p)
    seen = []
    with repops.deterministic("cpu", trace=lambda func, args, kwargs, out: seen.append(args[0].device.type)):
        opt.step()
    with repops.deterministic("cpu"):
        opt.step()  # (untraced: no group op across the two devices either)
    assert seen == ["cpu", "meta"]
    b1 = torch.tensor(0.9)  # (the spec's b1^t: a running binary32 product, two steps)
    assert torch.equal(bits(opt.state[ps[0]]["b1t"]), bits(b1 * b1))


def test_a_group_step_with_lists_of_other_lengths_is_refused():
    a = _group(3)
    a[3] = a[3][:2]
    with pytest.raises(ValueError, match="3 parameters, 3 gradients, 3 m, 2 v"):
        adamw_foreach_(*a, 3e-3, 0.9, 0.999, 1e-8, 0.01)


def test_the_ops_run_natively_and_close_to_the_composition():
    """Outside repops.deterministic() they are plain PyTorch (a model stays an ordinary model)."""
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(4, 8, generator=g, requires_grad=True), torch.randn(8, generator=g, requires_grad=True)
    rms_norm(x, w, 1e-5).sum().backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    _rms_plain(x2, w2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-5, atol=1e-6)
    q, k, v = (torch.randn(2, 5, 4, generator=g, requires_grad=True) for _ in range(3))
    torch.testing.assert_close(attention(q, k, v, None, 0.5), _att_plain(None, 0.5)(q, k, v), rtol=1e-5, atol=1e-6)
    x = torch.randn(2, 5, 8, generator=g)
    cos, sin = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    # (interleaved pairs as complex numbers, each times e^(i theta) = cos + i sin: another route)
    turned = torch.view_as_real(torch.view_as_complex(x.reshape(2, 5, 4, 2)) * torch.complex(cos, sin)).flatten(-2)
    torch.testing.assert_close(rope(x, cos, sin), turned, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["reference", "cpu", "cuda-emu"])
def test_sdpa_with_fully_masked_query_rows_gives_torchs_zeros_and_gradients(backend):
    """A query whose every key is masked (a left-padded position under a bool padding mask)
    attends to nothing: torch's SDPA gives 0 there (its _safe_softmax) and finite gradients;
    RepOps gave NaN, which also reached every key's and value's gradient. Now +0, on every
    backend with the same bits, and the rest to rounding of torch's."""
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, 4, 8, generator=g) for _ in range(3))
    keep = torch.rand(2, 1, 4, 4, generator=g) > 0.3
    keep[0, 0, 1], keep[1, 0, 3] = False, False
    a = [t.clone().requires_grad_() for t in (q, k, v)]
    want = F.scaled_dot_product_attention(*a, attn_mask=keep)
    want.sum().backward()
    got, grads = [], []
    for b in (backend, "cpu"):
        x = [t.clone().requires_grad_() for t in (q, k, v)]
        with repops.deterministic(b):
            out = F.scaled_dot_product_attention(*x, attn_mask=keep)
            out.sum().backward()
        got.append(out.detach())
        grads.append([t.grad for t in x])
    assert torch.equal(got[0][0, :, 1].view(torch.int32), torch.zeros(3, 8, dtype=torch.int32))  # +0, not NaN
    torch.testing.assert_close(got[0], want.detach(), rtol=1e-5, atol=1e-6)
    for mine, theirs in zip(grads[0], (t.grad for t in a)):
        assert not mine.isnan().any()
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
    assert torch.equal(got[0].view(torch.int32), got[1].view(torch.int32))  # every backend: the CPU's bits
    for mine, cpus in zip(grads[0], grads[1]):
        assert torch.equal(mine.view(torch.int32), cpus.view(torch.int32))
