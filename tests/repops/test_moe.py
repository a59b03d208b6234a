"""Mixture-of-experts models under RepOps (docs/NUMERICS.md §8, "Mixture of experts"): the
routing ops Hugging Face's experts paths call (torch._grouped_mm in every mode, histc, cumsum
of float counts to int32, the sort of expert ids) as torch computes them, and tiny Mixtral and
Qwen2-MoE models built from their config classes (no download) training a step under RepOps
as native torch does, to rounding, with the same bits on 1 and 2 threads, on each experts
path: "grouped_mm" (the default), "batched_mm" and "eager", with the router's auxiliary loss
too, and the numpy spec's bits on the compiled CPU backend and the emulated CUDA one."""
import os

import pytest
import torch

import repops
from repops import DomainFault, IndexFault, UnsupportedOpError
from repops.models.quick_train import num_threads
from repops.optim import AdamW

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def bits(t):
    return t.contiguous().view(torch.int32)


def _randn(g, *shape):
    return torch.randn(*shape, generator=g)


# -- the ops -------------------------------------------------------------------------------------------------
MODES = {"2d x 3d": ((8, 8), (3, 8, 4)), "2d x 2d": ((4, 8), (8, 4)), "3d x 2d": ((3, 4, 8), (8, 8))}


def _written(out, mode, end):
    """The part of a grouped product torch writes (past the last offset it leaves memory as it was)."""
    return out[:end] if mode == "2d x 3d" else out[:, :end] if mode == "3d x 2d" else out


@pytest.mark.parametrize("offs", [[2, 2, 8], [0, 3, 8], [8, 8, 8], [3, 5, 6]])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_grouped_mm_and_its_gradients_are_torchs_in_every_mode(mode, offs):
    """Rows in groups (experts), the reduction in groups (the experts' weight gradient), columns
    in groups; empty groups, a last offset short of the rows. Forward and both gradients to
    rounding of torch's own _grouped_mm, the rows past the last offset +0; the compiled
    backend gives the spec's (numpy reference's) bits."""
    g = torch.Generator().manual_seed(len(offs) + offs[0])
    a, b = (_randn(g, *s).requires_grad_() for s in MODES[mode])
    o = torch.tensor(offs, dtype=torch.int32)
    native = _written(torch._grouped_mm(a, b, offs=o), mode, offs[-1])
    w = _randn(g, *native.shape)
    grads = torch.autograd.grad((native * w).sum(), (a, b))
    got = {}
    for backend in ("cpu", "reference"):
        with repops.deterministic(backend):
            out = torch._grouped_mm(a, b, offs=o)
            got[backend] = (out, *torch.autograd.grad((_written(out, mode, offs[-1]) * w).sum(), (a, b)))
    out, ga, gb = got["cpu"]
    torch.testing.assert_close(_written(out, mode, offs[-1]), native, rtol=1e-5, atol=1e-5)
    end = offs[-1]  # (a gradient's rows or columns past it: torch's backward leaves them unwritten; RepOps' are +0)
    cut_a, cut_b = {"2d x 3d": (slice(0, end), slice(None)), "3d x 2d": (slice(None), (slice(None), slice(0, end))),
                    "2d x 2d": ((slice(None), slice(0, end)), slice(0, end))}[mode]
    torch.testing.assert_close(ga[cut_a], grads[0][cut_a], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gb[cut_b], grads[1][cut_b], rtol=1e-5, atol=1e-5)
    assert ga.abs().sum() == ga[cut_a].abs().sum() and gb.abs().sum() == gb[cut_b].abs().sum()
    if mode == "2d x 3d":
        assert torch.equal(bits(out[offs[-1]:]), bits(torch.zeros_like(out[offs[-1]:])))
    assert all(torch.equal(bits(x), bits(y)) for x, y in zip(got["cpu"], got["reference"]))


@pytest.mark.parametrize("offs", [[3, 2, 8], [2, 2, 9], [-1, 2, 8]])
def test_offsets_out_of_order_or_range_are_a_fault_naming_them(offs):
    """torch reads past its rows or leaves them unwritten (garbage, no error); RepOps faults."""
    a, b = torch.ones(8, 8), torch.ones(3, 8, 4)
    with pytest.raises(DomainFault, match="offs must be non-decreasing group ends"):
        with repops.deterministic():
            torch._grouped_mm(a, b, offs=torch.tensor(offs, dtype=torch.int32))


@pytest.mark.parametrize("bins,lo,hi", [(4, 0, 3), (8, 0, 7), (10, -1, 1), (7, 0.1, 0.9), (100, -3, 3),
                                        (33, -1e3, 2e3), (3, 1e6, 1e6 + 1)])
def test_histc_is_torchs_bit_for_bit(bins, lo, hi):
    """Random data, every bin edge and its neighbours either side, the ends, NaN, inf, -0:
    torch's counts exactly, on the compiled backend and the spec."""
    g = torch.Generator().manual_seed(bins)
    edges = torch.linspace(lo, hi, bins + 1)
    x = torch.cat([_randn(g, 300) * 2, edges, torch.nextafter(edges, torch.tensor(1e9)),
                   torch.nextafter(edges, torch.tensor(-1e9)), lo + (hi - lo) * torch.rand(300, generator=g),
                   torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, hi, lo])])
    native = torch.histc(x, bins, lo, hi)
    for backend in ("cpu", "reference"):
        with repops.deterministic(backend):
            assert torch.equal(bits(torch.histc(x, bins, lo, hi)), bits(native)), backend


@pytest.mark.parametrize("x", [[0.0, 2.0, 0.5, 1.5, 2.0], [3.0, 3.0], [-1.0, 7.25, 0.1, -0.0, 3.3, 7.25]])
def test_histc_with_a_range_from_the_data_is_torchs(x):
    """min == max (torch's default): the range is the data's min and max (folds of min/max
    kernels), widened by 1 where they are equal; a NaN extreme is a fault claim."""
    x = torch.tensor(x)
    with repops.deterministic():
        got = torch.histc(x, 4)
    assert torch.equal(got, torch.histc(x, 4))
    for bad in (float("nan"), float("inf")):  # a fault claim (rule `domain`), not a host read mid-step
        with pytest.raises(repops.DomainFault, match="not finite"), repops.deterministic():
            torch.histc(torch.tensor([1.0, bad]), 4)


def test_cumsum_of_float_counts_to_int32_is_torchs_and_int64_names_the_cast():
    counts = torch.tensor([3.0, 0.0, 5.0, 2.9, -1.5])
    with repops.deterministic():
        got = torch.cumsum(counts, 0, dtype=torch.int32)
        with pytest.raises(UnsupportedOpError, match=r"x\.long\(\)\.cumsum"):
            torch.cumsum(counts, 0, dtype=torch.int64)
    want = torch.cumsum(counts, 0, dtype=torch.int32)
    assert got.dtype == torch.int32 and torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integer_sort_is_the_stable_order_on_every_backend(dtype):
    """torch's default sort of integers is not stable (48 expert ids with ties already come
    out in another order): RepOps' sort is, natively and as its integer kernels."""
    g = torch.Generator().manual_seed(1)
    for shape, dim in (((48,), -1), ((3, 50), 1), ((20, 3), 0)):
        x = torch.randint(0, 4, shape, generator=g).to(dtype)
        for descending in (False, True):
            want = torch.sort(x, dim=dim, descending=descending, stable=True)
            for backend in ("cpu", "reference"):
                with repops.deterministic(backend):
                    v, i = torch.sort(x, dim, descending)
                assert v.dtype == dtype and torch.equal(v, want.values) and torch.equal(i, want.indices), \
                    (shape, descending, backend)


def test_bincount_with_minlength_is_a_fixed_length_count_and_an_id_past_it_a_fault():
    """The router's auxiliary loss counts tokens per expert with bincount(ids, minlength=E): a
    length that would depend on the values if an id reached E, so RepOps faults there."""
    x = torch.tensor([0, 3, 3, 1, 0, 0])
    with repops.deterministic():
        got = torch.bincount(x, minlength=4)
        with pytest.raises(IndexFault, match=r"index 3 .* outside \[0, 3\)"):
            torch.bincount(x, minlength=3)
    assert got.dtype == torch.int64 and torch.equal(got, torch.bincount(x, minlength=4))


# -- the models ----------------------------------------------------------------------------------------------
def tiny(family: str, experts: str = "grouped_mm"):
    """A tiny MixtralForCausalLM or Qwen2MoeForCausalLM (4 experts, top-2; Qwen2-MoE with its
    shared expert), built from its config class, on the experts path `experts`; "+aux": with the
    router's auxiliary load-balancing loss (output_router_logits: torch.bincount of expert ids)."""
    import transformers as T
    torch.manual_seed(0)
    kw = dict(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=4,
              num_key_value_heads=2, num_experts_per_tok=2, max_position_embeddings=32,
              experts_implementation=experts)
    if family.endswith("+aux"):
        family, kw = family[:-4], {**kw, "output_router_logits": True, "router_aux_loss_coef": 0.1}
    if family == "mixtral":
        return T.MixtralForCausalLM(T.MixtralConfig(num_local_experts=4, **kw))
    return T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(num_experts=4, moe_intermediate_size=8,
                                                  shared_expert_intermediate_size=16, **kw))


def ids(seed, rows=2):
    return torch.randint(0, 50, (rows, 6), generator=torch.Generator().manual_seed(seed))


def step(model, batch, repops_on=True, threads=1):
    """One AdamW step: (loss, gradients, parameters after the step), flat."""
    opt = AdamW(model.parameters(), lr=1e-2)
    with num_threads(threads), (repops.deterministic() if repops_on else torch.enable_grad()):
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        if repops_on:
            opt.step()
    return loss.detach(), grads, torch.cat([p.detach().reshape(-1) for p in model.parameters()])


CASES = [("mixtral", "grouped_mm"), ("mixtral", "batched_mm"), ("mixtral", "eager"), ("mixtral+aux", "grouped_mm"),
         ("qwen2-moe", "grouped_mm"), ("qwen2-moe+aux", "eager")]


@pytest.mark.parametrize("family,experts", CASES)
def test_a_tiny_moe_trains_as_torch_does_with_the_same_bits_on_1_and_2_threads(family, experts):
    loss, grads, params = step(tiny(family, experts), ids(0), threads=1)
    loss2, grads2, params2 = step(tiny(family, experts), ids(0), threads=2)
    assert torch.equal(bits(loss), bits(loss2)) and torch.equal(bits(grads), bits(grads2))
    assert torch.equal(bits(params), bits(params2))
    native_loss, native_grads, _ = step(tiny(family, experts), ids(0), repops_on=False)
    torch.testing.assert_close(loss, native_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads, native_grads, rtol=1e-4, atol=1e-5)
    assert grads.abs().sum() > 0


def test_the_grouped_path_records_one_grouped_matmul_op_per_expert_projection():
    """In training as in a job's graph, every grouped product is repops::grouped_mm (torch's
    meta accepts bf16 only, so torch.export could not capture aten._grouped_mm in float32)."""
    seen = []
    model, batch = tiny("mixtral"), ids(1)
    with repops.deterministic(trace=lambda func, args, kwargs, out: seen.append(str(func))):
        model(input_ids=batch, labels=batch).loss.backward()
    assert seen.count("repops.grouped_mm.default") == 2 + 4  # forward: up and down; backward: 2 each
    assert {"aten.histc.default", "aten.sort.default", "aten.cumsum.default"} <= set(seen)


@pytest.mark.parametrize("family,backend", [("mixtral", "reference"), ("qwen2-moe+aux", "reference"),
                                            ("mixtral+aux", "cuda-emu")])
def test_a_moe_step_has_the_specs_bits_on_the_compiled_backends(family, backend):
    """cpu: the C kernels; reference: the numpy spec; cuda-emu: the CUDA sources emulated."""
    def params(backend):
        model, batch = tiny(family), ids(0)
        opt = AdamW(model.parameters(), lr=1e-2)
        with repops.deterministic(backend):
            model(input_ids=batch, labels=batch).loss.backward()
            opt.step()
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert torch.equal(bits(params("cpu")), bits(params(backend)))


def test_transformers_own_grouped_matmul_runs_as_repops_one_op_whenever_transformers_loaded():
    """transformers registers `grouped_mm_fallback` when its MoE integration is imported, which
    may be after RepOps built its routes (a repops.deterministic() block earlier in the
    process): it is routed by name, never left to run its Python loop over offsets."""
    import transformers.integrations.moe  # noqa: F401
    seen = []
    g = torch.Generator().manual_seed(3)
    x, w, offs = _randn(g, 8, 8), _randn(g, 3, 8, 4), torch.tensor([2, 2, 8], dtype=torch.int32)
    with repops.deterministic(trace=lambda func, args, kwargs, out: seen.append(str(func))):
        got = torch.ops.transformers.grouped_mm_fallback(x, w, offs=offs)
    assert seen == ["repops.grouped_mm.default"]
    torch.testing.assert_close(got, torch._grouped_mm(x, w, offs=offs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a,b,offs,says", [((8, 8), (3, 8, 4), [2, 8], "matrix batch sizes have to match"),
                                           ((8, 8), (3, 4, 4), [2, 4, 8], "contraction dimension"),
                                           ((8, 8), (3, 8, 4), None, "offs must be a 1-d int32 tensor")])
def test_grouped_mm_refuses_what_torch_refuses(a, b, offs, says):
    o = None if offs is None else torch.tensor(offs, dtype=torch.int32)
    with pytest.raises((RuntimeError, UnsupportedOpError), match=says):
        with repops.deterministic():
            torch.ops.aten._grouped_mm(torch.ones(*a), torch.ones(*b), o)


def test_a_bad_offset_faults_in_the_decomposition_at_the_element_the_step_does():
    """A dispute decomposes the faulting node into its kernels: the offsets rule's fault.bool
    faults at the element training raised, and the clean offsets give the same kernels."""
    from offchain.dispute.oprun import FAULT_KERNEL, OpRun
    from offchain.protocol.trace import StepRecorder
    a, b = torch.ones(8, 8).requires_grad_(), torch.ones(3, 8, 4).requires_grad_()
    bad, good = torch.tensor([3, 2, 8], dtype=torch.int32), torch.tensor([2, 3, 8], dtype=torch.int32)
    rec = StepRecorder([a, b], [bad], chunk=16)
    with pytest.raises(DomainFault) as info:
        with repops.deterministic("cpu", trace=rec):
            torch._grouped_mm(a, b, offs=bad).sum().backward()
    assert (info.value.rule, info.value.element) == ("offsets", 1)
    node, inputs = rec.faulted()
    assert str(node.op) == "repops.grouped_mm.default" and torch.equal(inputs[-1], bad)
    run = OpRun(node.structure(), inputs, 16)
    kernels = run.kernels()
    k, e, rule = run.fault
    assert kernels[k].name == FAULT_KERNEL and (e, rule) == (1, "offsets")
    clean = OpRun(node.structure(), [*inputs[:-1], good], 16)
    assert [x.structure() for x in clean.kernels()] == [x.structure() for x in kernels] and clean.fault is None
