"""What the CUDA launch glue does per training step, counted on the emulator with the torch
tensors treated as CUDA tensors (repops/cuda/counting.py): no host sync inside a step (index
checks are read once when the block ends), no constant uploaded after the first step, no copy
of the array module's own (operands read through their strides) and no DLPack exchange
(tensors and kernel outputs cross as views of torch's memory), and a ceiling on launches that
falls as the glue gets leaner (lower it when a change does: a regression then fails here). The
device paths of the glue give the CPU's bits (real kernels), and a fault found on the device is
the same fault."""
import numpy as np
import pytest
import torch

import repops
from repops.backends import get
from repops.cuda.counting import counting
from repops.cuda.emulator import emulator
from repops.models import build
from repops.models.quick_train import synthetic_batches
from repops.optim import AdamW

from repops_samples import SAMPLES  # noqa: E402  (tests/repops: see conftest.py)
from test_faults import CASES, ONE_HOT, _run  # noqa: E402

# per step of build(name) at its defaults (synthetic_batches); before #37 the same steps had
# 4 / 6 host syncs and uploaded 23 / 66 constants; before the multi-tensor AdamW, 47 / 186 launches,
# 33 before addmm's bias moved into the product's epilogue, and 154 for llama before RoPE was one op
# (cupy_ops: CuPy's own kernels, from its own memory pool, would keep a step out of a CUDA graph;
# the index checks are our kernel, index_check_i64, a launch each; views: CuPy arrays made over
# torch's memory, device.as_array's calls on the GPU, 131 / 781 at the benchmark's shapes on the
# H200 as here: ~16 us of host each there, the largest share of a step's glue; 132 / 426 before the
# norm and row kernels took one never-touched element for their unused pointers, Ops._unused;
# llama's 111th launch is embedding backward's finiteness check, finite_check_f32, counted since
# it replaced 3 CuPy kernels a step that a stub count left out and a CUDA graph could not hold)
CEILING = {"mlp": {"launches": 32, "copies": 0, "dlpack": 0, "cupy_ops": 0, "views": 127},
           "llama": {"launches": 111, "copies": 0, "dlpack": 0, "cupy_ops": 0, "views": 409}}


def _trainer(name, backend="cuda-emu"):
    torch.manual_seed(0)
    model = build(name)
    opt = AdamW(model.parameters(), lr=1e-3)
    batches = synthetic_batches(name, 2)

    def step(s):
        with repops.deterministic(backend):
            opt.zero_grad(set_to_none=True)
            model.loss(*batches[s]).backward()
            opt.step()
    return model, step


@pytest.fixture(scope="module")
def rt():
    get("cuda-emu")  # built and self-checked before anything is counted
    return emulator()


@pytest.mark.parametrize("name", sorted(CEILING))
def test_a_step_reads_nothing_on_the_host_and_uploads_no_constant(rt, name):
    _, step = _trainer(name)
    with counting(rt, stub=True, sites=False):
        step(0)  # the first step uploads the constants once
    with counting(rt, stub=True) as c:
        step(1)
    syncs = dict(c.sites.get("sync", {}))
    assert c.syncs == 1 and all(s.endswith("settle)") for s in syncs), \
        f"host syncs in a step: {syncs} (only the index checks' one read when the block ends may sync)"
    assert c.uploads == 0, f"uploads after the first step: {dict(c.sites.get('upload', {}))}"
    for k, most in CEILING[name].items():
        assert getattr(c, k) <= most, f"{name}: {k} per step rose to {getattr(c, k)} (ceiling {most})"


@pytest.mark.parametrize("name", sorted(CEILING))
def test_every_check_in_a_step_is_one_a_cuda_graph_can_hold(rt, name):
    """offchain/trainer/graphs.py captures an untraced step only if each of its checks is the
    backend's own kernel writing slots (a replay rewrites them): a check left as CuPy's flag
    arrays ends the capture (faults._keep) and the step runs eagerly (the small Llama's
    embedding backward's finiteness check did, on the H200)."""
    from repops import faults
    _, step = _trainer(name)
    step(0)
    with counting(rt, stub=True, sites=False), faults.captured() as kept:
        step(1)
    rules = sorted({rule for _, rule, *_ in kept})
    assert all(hasattr(f, "keep") for f, *_ in kept), rules
    assert rules == {"mlp": ["index"], "llama": ["domain", "index"]}[name]  # (nll's targets; embedding's)


def _bits(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).view(torch.int32)


def test_the_device_paths_of_the_glue_give_the_cpu_bits(rt):
    """Two AdamW steps of the MLP, kernels run, tensors as device tensors: the nll count on
    the device, deferred index checks, cached constants."""
    model, step = _trainer("mlp")
    with counting(rt, sites=False):
        step(0), step(1)
    want, cpu = _trainer("mlp", "cpu")
    cpu(0), cpu(1)
    assert torch.equal(_bits(model), _bits(want))


def test_nll_with_ignored_rows_keeps_its_count_on_the_device(rt):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 5, generator=g).log_softmax(-1)
    t = torch.tensor([1, -100, 4, 0, -100, 2])
    want = [torch.nn.functional.nll_loss(x, t, reduction=r) for r in ("mean", "sum", "none")]
    with repops.deterministic("cpu"):
        want = [torch.nn.functional.nll_loss(x, t, reduction=r) for r in ("mean", "sum", "none")]
    with counting(rt) as c, repops.deterministic("cuda-emu"):
        got = [torch.nn.functional.nll_loss(x, t, reduction=r) for r in ("mean", "sum", "none")]
        inside = c.syncs
    assert inside == 0 and c.uploads == 0
    assert all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in zip(got, want))


def test_a_fault_on_the_device_is_raised_when_the_block_ends_as_the_same_fault(rt):
    w = torch.randn(5, 3)
    idx = torch.tensor([[0, 2], [7, 1]])
    with pytest.raises(repops.Fault) as cpu, repops.deterministic("cpu"):
        torch.nn.functional.embedding(idx, w)
    ran_on = []
    with counting(rt) as c, pytest.raises(repops.Fault) as dev, repops.deterministic("cuda-emu"):
        out = torch.nn.functional.embedding(idx, w)
        ran_on.append((c.syncs, out.shape))  # the op returned: its check waits for the block's end
    assert ran_on == [(0, torch.Size([2, 2, 3]))]
    assert (str(dev.value), dev.value.rule, dev.value.element) == (str(cpu.value), cpu.value.rule, cpu.value.element)
    assert type(dev.value) is type(cpu.value)


def test_a_fault_behind_another_error_is_the_one_raised(rt):
    w = torch.randn(5, 3)
    with counting(rt), pytest.raises(repops.Fault) as e, repops.deterministic("cuda-emu"):
        torch.nn.functional.embedding(torch.tensor([9]), w)
        raise RuntimeError("what the garbage of the faulted op caused")
    assert isinstance(e.value.__cause__, RuntimeError)


def test_a_recorded_trace_still_faults_at_its_op(rt):
    """A step recorder (a trace with `before`) needs the fault at the op that raised it."""
    class Recorder:
        seen = []

        def before(self, func, args, kwargs):
            pass

        def __call__(self, func, args, kwargs, out):
            self.seen.append(func)
    w = torch.randn(5, 3)
    rec = Recorder()
    with counting(rt), repops.deterministic("cuda-emu", trace=rec):
        with pytest.raises(repops.Fault):
            torch.nn.functional.embedding(torch.tensor([9]), w)


def test_optimizer_scalars_live_with_their_parameter():
    p = torch.nn.Parameter(torch.zeros(3, device="meta"))
    opt = AdamW([p], lr=1e-3, schedule=repops.optim.Schedule("linear", 10))
    assert {opt.state[p]["b1t"].device.type, opt.state[p]["b2t"].device.type, opt.steps.device.type} == {"meta"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_fault_case_is_the_same_fault_on_the_device(rt, name):
    """tests/repops/test_faults.py's cases, their checks deferred on the emulated device."""
    fn, good, bad, rule, element = CASES[name]
    with counting(rt) as c:
        _run(fn, good, "cuda-emu")
        with pytest.raises(repops.Fault) as info:
            _run(fn, bad, "cuda-emu")
    kind = {"index": repops.IndexFault, "division": repops.DivisionFault, "domain": repops.errors.DomainFault}[rule]
    assert (type(info.value), info.value.rule, info.value.element) == (kind, rule, element)
    assert all(s.endswith(("settle)", "(first)")) for s in c.sites["sync"])  # read when the block ended


@pytest.mark.parametrize("name", sorted(ONE_HOT))
def test_a_non_finite_one_hot_term_on_the_device_is_the_same_fault_read_once(rt, name):
    """tests/repops/test_faults.py's one-hot sums (rule `domain`, faults.finite) on the emulated
    device: the backend's finite_check_f32, read when the block ends, names the same element."""
    fn, shape, element = ONE_HOT[name]
    poisoned = torch.arange(10.0).reshape(shape)
    poisoned.view(-1)[element] = float("inf")
    with counting(rt) as c, pytest.raises(repops.DomainFault) as info, repops.deterministic("cuda-emu"):
        fn(poisoned)
    assert (info.value.rule, info.value.element) == ("domain", element)
    assert c.kernels["finite_check_f32"] >= 1, dict(c.kernels)
    assert all(s.endswith(("settle)", "(first)")) for s in c.sites["sync"])  # read when the block ended


VIEWS = {"contiguous": lambda a: a, "transposed": lambda a: a.T, "sliced": lambda a: a[1:, ::2],
         "reversed": lambda a: a[::-1, 3:], "broadcast": lambda a: np.broadcast_to(a[2:3], (5, a.shape[1])),
         "row": lambda a: a[8]}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("ignore", [None, -100])
def test_the_device_index_check_finds_the_first_bad_element_the_comparisons_find(rt, view, ignore):
    """kernels/indexing.cu index_check_i64 (faults.index_flags on the device) against the spec's
    comparisons on the host: every layout a step hands it (a slice of the batch, a transpose,
    a broadcast), enough elements for each thread to loop, bad elements anywhere or nowhere;
    several checks share one block's slots, read in one download."""
    from repops import faults
    from repops.cuda.ops import DeviceCheck, Ops
    ops, rng = Ops(rt), np.random.default_rng(7)
    cases = []
    for bad in (0, 1, 3, 40):
        host = rng.integers(0, 10, (9, 31))
        for _ in range(bad):  # outside [0, 10) (or ignore_index, which passes where given)
            host[rng.integers(0, 9), rng.integers(0, 31)] = rng.choice([-1, 10, 2 ** 40, -100, -2 ** 63])
        host[8, 30] = 10 if bad == 1 else host[8, 30]  # the last element: the latest a thread reaches
        cases.append(host)
    checks = [ops.index_check(VIEWS[view](rt.upload(h)), 10, ignore) for h in cases]
    assert all(isinstance(c, DeviceCheck) for c in checks)  # the kernel, not the comparisons' fallback
    assert len({id(c.slots) for c in checks}) == 1
    for h, c in zip(cases, checks):
        assert faults.first(c) == faults.first(faults.index_flags.reference(VIEWS[view](h), 10, ignore))
    later = ops.index_check(rt.upload(cases[0]), 10, ignore)
    assert later.slots is not checks[0].slots  # read slots are never written again


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_the_device_finite_check_finds_the_first_non_finite_element_the_comparisons_find(rt, view):
    """kernels/indexing.cu finite_check_f32 (faults.finite_flags on the device) against the
    comparisons on the host, on every layout: none, one (the last element), or many of
    inf, -inf and NaN payloads."""
    from repops import faults
    from repops.cuda.ops import DeviceCheck, Ops
    ops, rng = Ops(rt), np.random.default_rng(8)
    specials = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFFFFFFF, 0x7F800001], np.uint32).view(np.float32)
    cases = []
    for bad in (0, 1, 3, 40):
        host = rng.standard_normal((9, 31)).astype(np.float32)
        where = [host.size - 1] if bad == 1 else rng.integers(0, host.size, bad)  # (one: the last a thread reaches)
        host.reshape(-1)[where] = rng.choice(specials, bad)
        cases.append(host)
    checks = [ops.finite_check(VIEWS[view](rt.upload(h))) for h in cases]
    assert all(isinstance(c, DeviceCheck) for c in checks)
    for h, c in zip(cases, checks):
        assert faults.first(c) == faults.first(faults.finite_flags.reference(VIEWS[view](h)))


def test_checks_a_capture_keeps_are_read_after_each_replay_not_when_the_block_ends(rt):
    """repops.faults.captured (offchain/trainer/graphs.py: a step captured as a CUDA graph):
    nothing has run when the captured block ends, so its index checks are kept, not read;
    replayed() reads their slots anew after each replay (what the replay wrote) and raises the
    first fault; a check the capture cannot repeat (a flag array of CuPy's) ends the capture."""
    from repops import faults
    from repops.cuda.ops import Ops
    from repops.errors import BackendError
    from repops.reference.prims import implementations
    ops = Ops(rt)
    bad = rt.upload(np.array([0, 5, 9, 2], np.int64))  # element 2 outside [0, 6)
    with implementations({"index_check": ops.index_check}), faults.captured() as kept:
        with faults.deferred():
            faults.index_in_range(bad, 6, "capture")
    (check, *_), = kept  # kept, not raised: a read during a capture would break it
    assert not check.slots.open and ops.index_check(bad, 6, None).slots is not check.slots
    slots = check.slots.array.view(np.ndarray)
    slots[check.start:check.stop] = 0  # a replay that met no bad index
    faults.replayed(kept)
    slots[check.start] = 2 + 1  # one that met element 2 (what index_check_i64 writes)
    with pytest.raises(repops.IndexFault) as info:
        faults.replayed(kept)
    assert info.value.element == 2 and "index 9" in str(info.value)
    with counting(rt), implementations({}), faults.captured():  # (counting: a device array's checks queue)
        with pytest.raises(BackendError, match="cannot be captured"), faults.deferred():
            faults.divisor_nonzero(bad, "i64", "capture", kernels=False)


def test_device_constants_are_keyed_by_their_bits(rt):
    """Ops.constant: a list of Python floats keyed by its binary64 bytes (-0.0 and each NaN
    apart from +0.0 and each other), the same binary32 bits as the numpy path's, uploaded once."""
    from repops.cuda.ops import Ops
    ops = Ops(rt)
    nan2 = np.frombuffer(np.uint64(0x7FF0000000000002).tobytes(), np.float64)[0]
    values = ([0.0], [-0.0], [float("nan")], [float(nan2)], [1e-5, -0.0, 3.0], [1.0 + 2 ** -30], [1e-45])
    got = [ops.constant(v) for v in values]
    for v, d in zip(values, got):
        want = np.asarray(v, np.float32)
        assert np.array_equal(np.asarray(d.view(np.ndarray)).view(np.uint32), want.view(np.uint32)), v
        assert ops.constant(list(v)) is d  # (once per value)
        assert ops.constant(np.asarray(v, np.float32)).view(np.ndarray).tobytes() == want.tobytes()
    assert len({id(d) for d in got}) == len(got)
    assert np.asarray(ops.constant([-0.0]).view(np.ndarray)).view(np.uint32)[0] == 0x80000000


def _embed_fault(idx):
    """The IndexFault repops.deterministic("cuda-emu") raises for embedding(idx) when its block
    ends (None: none), and the index_check Ops the block's table used."""
    w = torch.randn(5, 3)
    try:
        with repops.deterministic("cuda-emu"):
            torch.nn.functional.embedding(torch.tensor(idx), w)
            ops = repops.reference.prims._IMPLS.get()["index_check"].__self__
    except repops.IndexFault as e:
        return e.element, None
    return None, ops


def test_a_block_s_index_checks_are_its_own_though_its_table_is_reused(rt):
    """repops.backends builds a runtime's table once per thread: each block still starts its
    index checks on new slots, so a fault is raised by the block whose op met it, with its own
    element, never lost, nor raised again (or instead) by a later block, nested or not."""
    from repops.reference.prims import implementations  # noqa: F401  (_IMPLS: the block's table)
    with counting(rt, sites=False):
        assert _embed_fault([[0, 2], [7, 1]])[0] == 2
        clean, ops = _embed_fault([[0, 1]])
        assert clean is None and _embed_fault([[0, 1]])[1] is ops  # the table is reused (this thread's)
        assert _embed_fault([[3, 9, 1]])[0] == 1  # its own element, not the earlier block's 2
        w = torch.randn(5, 3)
        with pytest.raises(repops.IndexFault) as outer, repops.deterministic("cuda-emu"):
            torch.nn.functional.embedding(torch.tensor([4, 4, 6]), w)  # element 2: raised when this block ends
            assert _embed_fault([[1, 2]])[0] is None  # a clean nested block does not read it as its own
            assert _embed_fault([[8, 1]])[0] == 0  # a faulting one raises its own
            torch.nn.functional.embedding(torch.tensor([1, 5]), w)  # a later check of the outer block
        assert outer.value.element == 2 and "index 6" in str(outer.value)


def test_each_thread_has_its_own_table_and_check_slots(rt):
    import threading
    got, barrier = {}, threading.Barrier(2)

    def run(name, idx):
        barrier.wait()
        got[name] = [_embed_fault(idx) for _ in range(3)]
    with counting(rt, sites=False):
        threads = [threading.Thread(target=run, args=a) for a in (("bad", [[1, 5]]), ("good", [[1, 4]]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [e for e, _ in got["bad"]] == [1, 1, 1] and [e for e, _ in got["good"]] == [None] * 3
    assert get("cuda-emu")["index_check"].__self__ is not got["good"][0][1]  # (this thread's is another)


def test_embedding_backward_past_a_fault_writes_nothing_outside_its_output(rt):
    """After a deferred (or noted) fault the step runs on with the index outside [0, V): the
    one-hot rule's value (a row of zeros: adds nothing; a non-finite entry poisons every row),
    never a write outside the output, on the CPU and the CUDA kernels alike."""
    from repops.reference import nn as N
    rng = np.random.default_rng(3)
    g = rng.standard_normal((6, 5)).astype(np.float32)
    index = np.array([1, 7, 3, -2, 1, 2 ** 40], np.int64)
    from repops.reference.prims import implementations
    for poison in (None, (1, 2), (3, 0), (0, 4)):  # a non-finite entry at an index outside (7, -2), then inside
        gp = g.copy()
        if poison:
            gp[poison] = np.inf
        with implementations({}):  # the reference: onehot, then the matmul
            want = N.embedding_backward(index, gp, 4)
        for backend in ("cpu", "cuda-emu"):
            got = np.asarray(get(backend)["embedding_backward"](index, gp, 4))
            assert np.array_equal(got.view(np.uint32), np.asarray(want).view(np.uint32)), (backend, poison, got, want)


# -- on a GPU (scripts/gpu-check.sh): the same, with real CUDA tensors ----------------------------
def _gpu():
    from kernel_samples import backend_table  # noqa: E402  (tests/repops: see conftest.py)
    backend_table("cuda")  # skips without a device


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_fault_case_is_the_same_fault_on_the_gpu(name):
    """Checks deferred to the block's end on CUDA tensors; the device still works after
    (no write outside an output past the fault: no sticky CUDA error)."""
    _gpu()
    fn, good, bad, rule, element = CASES[name]

    def run(index, device):
        from test_faults import W, X  # noqa: E402
        x, w = X.clone().to(device).requires_grad_(), W.clone().to(device).requires_grad_()
        with repops.deterministic():
            fn(x, w, index.to(device)).sum().backward()
    run(good, "cuda")
    with pytest.raises(repops.Fault) as gpu:
        run(bad, "cuda")
    with pytest.raises(repops.Fault) as cpu:
        run(bad, "cpu")
    assert (type(gpu.value), str(gpu.value), gpu.value.rule, gpu.value.element) == (
        type(cpu.value), str(cpu.value), cpu.value.rule, cpu.value.element)
    assert torch.ones(3, device="cuda").sum().item() == 3.0


@pytest.mark.gpu
def test_a_step_on_a_side_stream_gives_the_cpu_bits():
    """CuPy's work follows torch's current stream (repops.cuda.device.torch_stream), as a
    CUDA graph capture needs; optimizer scalars on the parameters' device."""
    _gpu()
    torch.manual_seed(0)
    model = build("mlp").cuda()  # built on the CPU, moved: AdamW's scalars must still be on the GPU
    opt = AdamW(model.parameters(), lr=1e-3)
    assert opt.state[next(model.parameters())]["b1t"].device.type == "cuda"
    batches = [tuple(t.cuda() for t in b) for b in synthetic_batches("mlp", 2)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # the copies to the GPU ran on the default stream
    with torch.cuda.stream(side):
        for b in batches:
            with repops.deterministic():
                opt.zero_grad(set_to_none=True)
                model.loss(*b).backward()
                opt.step()
    torch.cuda.synchronize()
    want, cpu = _trainer("mlp", "cpu")
    cpu(0), cpu(1)
    assert torch.equal(_bits(model).cpu(), _bits(want))


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_op_on_the_emulated_device_equals_the_reference(rt, name):
    """The sample table through the glue's device paths (what a GPU runs: CuPy arrays of
    torch's tensors), kernels emulated: the reference's bits, forward and backward."""
    from test_ops import bits, run
    fn, make = SAMPLES[name]
    with counting(rt, sites=False):
        o1, g1 = run(fn, make(), "cuda-emu")
    o2, g2 = run(fn, make(), "reference")
    assert torch.equal(bits(o1), bits(o2))
    assert len(g1) == len(g2) and all(torch.equal(bits(a), bits(b)) for a, b in zip(g1, g2))


def test_the_counter_sees_every_kind_of_host_read(rt):
    """The harness itself: each way of reading a device value on the host is one sync."""
    t = torch.arange(3.0)
    with counting(rt) as c, repops.deterministic("cuda-emu"):
        a = (t * 2.0).sum()
        a.item(), float(a), bool(a), t.tolist(), t.cpu()
    assert c.syncs == 5 and c.launches >= 2


def _busy(x):
    return (x @ x).sum()


def test_the_gpu_host_profile_counts_calls_per_step_and_sorts_by_own_time():
    """benchmarks/repops_cuda.py's host_profile (recorded per model by the GPU benchmark):
    calls and times per step, paths relative to the repository."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from repops_cuda import host_profile
    x = torch.randn(32, 32)

    def step():
        for _ in range(3):
            _busy(x)
    rows = host_profile(step, reps=4, top=100)
    mine = [r for r in rows if r["function"].endswith("(_busy)")]
    assert len(mine) == 1 and mine[0]["calls"] == 3, rows
    assert mine[0]["function"].startswith("tests/cuda/test_launch_glue.py:")
    own = [r["own_ms"] for r in rows]
    assert own == sorted(own, reverse=True) and mine[0]["cumulative_ms"] >= mine[0]["own_ms"] >= 0


def test_a_host_constant_and_a_broadcast_device_array_of_one_shape_each_launch_as_what_they_are(rt):
    """prim_map_f32's planned launches are keyed by the operands' shapes and strides: a host
    constant (P.const: one value at stride 0, moved as that value) and a device array broadcast
    to the same shape (stride 0 too, read where it is) must not share a plan (one did, while this
    was written: the device view then reached the kernel as a one-element reshape, which failed).
    Either first, each gives the reference's bits."""
    from repops.reference import prims as P
    table = get("cuda-emu")
    x = rt.upload(np.arange(20, dtype=np.float32).reshape(4, 5) - 7.5)
    one = rt.xp.broadcast_to(rt.upload(np.array([2.5], np.float32)), (4, 5))
    host = P.const(2.5, (4, 5))
    with P.implementations({}):
        want = np.asarray(P.mul(np.asarray(x), np.full((4, 5), 2.5, np.float32)))
    for order in ((host, one), (one, host)):
        for c in order:
            got = table["mul"](x, c)
            assert rt.is_device(got) and np.array_equal(np.asarray(got).view(np.uint32), want.view(np.uint32))


def test_constants_are_shared_per_value_and_shape_and_keep_every_bit():
    """P.const's broadcast of a Python number is made once per value and shape: read-only (a
    shared one must not be written), and keyed by the number's bits: -0.0 is not +0.0, and two
    NaN payloads are two constants."""
    import struct
    from repops.reference import prims as P
    a, b = P.const(1.5, (3, 2)), P.const(1.5, (3, 2))
    assert a is b and not a.flags.writeable and a.shape == (3, 2) and not any(a.strides)
    assert P.const(1.5, (2, 3)) is not a
    neg, pos = P.const(-0.0, (2,)), P.const(0.0, (2,))
    assert neg.view(np.uint32)[0] == 0x80000000 and pos.view(np.uint32)[0] == 0
    quiet, payload = (struct.unpack("<d", struct.pack("<Q", q))[0] for q in (0x7FF8000000000000, 0x7FFC000000000000))
    nans = P.const(quiet, (1,)), P.const(payload, (1,))
    assert nans[0].view(np.uint32)[0] != nans[1].view(np.uint32)[0]
    assert P.const(3, (2,)).dtype == np.float32 and P.const(3, (2,))[0] == 3.0
