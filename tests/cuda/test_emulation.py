"""The CUDA backend beyond the per-kernel table of tests/repops/test_kernels.py (which runs
every kernel on the emulator and the GPU): matmul tilings and layouts, values crossing to the
device, every torch-level op, training. Each test runs on the CPU emulator (unmodified
sources under repops/cuda/emu; CI) and, marked gpu, on a real GPU where CuPy finds one."""
import re

import numpy as np
import pytest
import torch

from repops.backends import get
from repops.cuda.kernels import KERNELS, sources
from repops.reference import linalg as RL
from repops.reference import prims as P
from repops.reference.fold import fold as ref_fold


from kernel_samples import backend_table as _table  # noqa: E402  (tests/repops: see conftest.py)


@pytest.fixture(scope="module", params=["cuda-emu", pytest.param("cuda", marks=pytest.mark.gpu)])
def emu(request):
    return _table(request.param)


def host(x):
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def bits(x):
    x = host(x)
    return x.view(np.uint32) if x.dtype == np.float32 else x


def same(a, b):
    a, b = host(a), host(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    diff = np.flatnonzero(bits(a).reshape(-1) != bits(b).reshape(-1))
    assert diff.size == 0, f"{diff.size} elements differ, first at {diff[0]}: {a.reshape(-1)[diff[0]]!r} vs {b.reshape(-1)[diff[0]]!r}"


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38, -3.4028235e38,
                     1.0, -1.0, 0.5, 2.5, -2.5, 3.5, 2.0**31, -2.0**31, 2.0**31 - 128, 1e10], np.float32)


def operand(rng, n, kind="normal"):
    x = rng.standard_normal(n).astype(np.float32) * np.float32(3.0)
    x[::5] = SPECIALS[rng.integers(0, SPECIALS.size, x[::5].size)]
    x[1::9] = rng.integers(1, 1 << 23, x[1::9].size).astype(np.uint32).view(np.float32)  # subnormals
    if x.size > 3:
        x[3] = np.uint32(0x7FA00001).view(np.float32)  # a non-canonical NaN
    return x


def test_every_kernel_in_the_sources_is_in_the_table_and_emulated():
    found = {}
    for src in sources():
        text = src.read_text()
        slots = int(m.group(1)) if (m := re.search(r"#define RP_ADAMW_SLOTS (\d+)", text)) else 0
        for name, body in re.findall(r"#define (\w+)[ \t]+((?:[^\n]*\\\n)*[^\n]*)", text):  # object-like macros
            if name.endswith("_ARGS"):  # (a parameter list two kernels share)
                text = re.sub(rf"\({name}\)", "(" + body.replace("\\\n", " ") + ")", text)
        for name, params in re.findall(r'extern "C" __global__ void(?:\s+__launch_bounds__\([^)]*\))?\s+(\w+)\(((?:[^()]|\([^()]*\))*)\)',
                                       text):
            found[name] = (src.name, params.count(",") + 1 + 3 * params.count("RP_STRIDES(")  # 4 strides each
                           + slots * (2 * params.count("RP_ADAMW_SCALAR_SLOTS") + 5 * params.count("RP_ADAMW_ELEMENT_SLOTS")))
    assert found == {k: (src, len(params)) for k, (src, params) in KERNELS.items()}
    for src in sources():  # what the emulator does not provide must not ship
        text = src.read_text()
        assert not re.search(r"__shfl|atomic[A-Z]|__ballot|__any_sync|__all_sync", text), src.name


@pytest.mark.parametrize("shape", [(1, 1, 1), (37, 29, 53), (130, 9, 140), (128, 16, 128), (3, 0, 5), (0, 4, 4),
                                   (257, 33, 129)])
def test_matmul_tiles_and_edges(emu, shape):
    M_, K, N = shape
    rng = np.random.default_rng(sum(shape))
    a = operand(rng, M_ * K).reshape(M_, K) if M_ * K else np.zeros((M_, K), np.float32)
    b = operand(rng, K * N).reshape(K, N) if K * N else np.zeros((K, N), np.float32)
    same(emu["matmul"](a, b), RL.matmul.reference(a, b))


@pytest.mark.parametrize("tuning", [{"MATMUL_BM": 64, "MATMUL_BK": 8, "MATMUL_WM": 32, "MATMUL_WN": 64},
                                    {"MATMUL_BN": 64, "MATMUL_BK": 8, "MATMUL_WM": 128, "MATMUL_WN": 16}])
def test_matmul_tile_shape_never_changes_bits(tuning):
    """The tile shape is tuning: other shapes (other warps, slices, loads) give the same bits."""
    from repops.cuda.emulator import Emulator
    from repops.cuda.ops import Ops
    ops = Ops(Emulator(tuning=tuning))
    ops.small_below = 0  # (the tuned kernel, whatever the shape)
    t = ops.table()
    rng = np.random.default_rng(9)
    for m, k, n in ((37, 29, 53), (130, 12, 68), (5, 40, 257)):
        a, b = operand(rng, m * k).reshape(m, k), operand(rng, k * n).reshape(k, n)
        same(t["matmul"](a, b), RL.matmul.reference(a, b))


@pytest.mark.parametrize("small_below", [0, 10 ** 9], ids=["tuned-tiles", "small-tiles"])
@pytest.mark.parametrize("rt_name", ["cuda-emu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_both_matmul_kernels_give_the_spec_bits(rt_name, small_below):
    """matmul_f32 (the tuned tiles) and matmul_small_f32 (what a product too small to fill the
    GPU runs on), each pinned: edges, a batch, strided operands, a bias in the epilogue."""
    from repops.cuda.ops import Ops
    _table(rt_name)  # built and self-checked (skips without a GPU)
    if rt_name == "cuda-emu":
        from repops.cuda.emulator import emulator as runtime
    else:
        from repops.cuda.device import device as runtime
    ops = Ops(runtime())
    ops.small_below = small_below
    rng = np.random.default_rng(13)
    for m, k, n in ((1, 1, 1), (37, 29, 53), (130, 9, 140), (65, 16, 64), (3, 0, 5), (257, 33, 129)):
        a, b = operand(rng, m * k).reshape(m, k), operand(rng, k * n).reshape(k, n)
        same(ops.matmul(a, b), RL.matmul.reference(a, b))
        c = operand(rng, n)
        same(ops.matmul_add(a, b, c), RL.matmul_add.reference(a, b, c))
    a, b = operand(rng, 3 * 2 * 19 * 11).reshape(3, 2, 19, 11), operand(rng, 2 * 11 * 23).reshape(2, 11, 23)
    same(ops.matmul(a, b), RL.matmul.reference(a, b))
    a, b = operand(rng, 50 * 40).reshape(50, 40)[::2, 3:], operand(rng, 40 * 30).reshape(40, 30)[3:, ::-1]
    same(ops.matmul(a, b), RL.matmul.reference(a, b))


def test_matmul_reads_misaligned_device_rows():
    """Device views whose rows are not 16-byte aligned take the element-wise load path."""
    from repops.cuda.emulator import emulator
    from repops.cuda.ops import Ops
    rt = emulator()
    rng = np.random.default_rng(10)
    a, b = operand(rng, 33 * 16).reshape(33, 16), operand(rng, 16 * 20).reshape(16, 20)
    da = rt.upload(np.concatenate([np.float32([7.0]), a.reshape(-1)]))[1:].reshape(33, 16)
    db = rt.upload(np.concatenate([np.float32([7.0]), b.reshape(-1)]))[1:].reshape(16, 20)
    assert da.ctypes.data % 16 and db.ctypes.data % 16
    same(Ops(rt).matmul(da, db), RL.matmul.reference(a, b))


def test_batched_and_broadcast_matmul(emu):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 2, 19, 11)).astype(np.float32)
    b = rng.standard_normal((2, 11, 23)).astype(np.float32)
    same(emu["matmul"](a, b), RL.matmul.reference(a, b))
    same(emu["matmul"](a.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2), b), RL.matmul.reference(a, b))


# -- through torch: every RepOps op of the sample table, and training -----------------------------------
from repops_samples import SAMPLES, VARIANTS, on_device  # noqa: E402  (tests/repops: see conftest.py)


def _torch_run(name, where, variant="plain"):
    """The sample on the emulated kernels (CPU tensors, backend cuda-emu), on the GPU
    (CUDA tensors: repops.deterministic() picks the cuda backend) or on the reference."""
    from test_ops import run
    fn, make = SAMPLES[name]
    inputs = [VARIANTS[variant](x, i) if variant in VARIANTS else x for i, x in enumerate(make())]
    if where == "cuda":
        _table("cuda")
        on_device("cuda")
        inputs = [x.cuda() for x in inputs]
    out, grads = run(fn, inputs, {"cuda": "cpu"}.get(where, where))
    return out.cpu(), [g.cpu() for g in grads]


@pytest.mark.parametrize("variant", ["plain"] + sorted(VARIANTS))
@pytest.mark.parametrize("where", ["cuda-emu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_op_equals_the_reference(name, where, variant):
    """Normal, special, subnormal-heavy and signed-zero inputs, forward and backward."""
    from test_ops import same_outcome
    same_outcome(lambda: _torch_run(name, where, variant), lambda: _torch_run(name, "reference", variant))


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_op_takes_the_gpus_paths_on_the_emulated_device(name):
    """The sample with its tensors treated as CUDA tensors (repops/cuda/counting.py): the glue
    takes its device paths, where CuPy refuses a host array among device operands and numpy's
    implicit conversion of a device array. Forty-six GPU failures of this kind passed every
    emulated test before (2026-11-26, H200): host position tables, the reference fold."""
    from test_ops import run, same_outcome
    from repops.cuda.counting import counting
    from repops.cuda.emulator import emulator
    fn, make = SAMPLES[name]

    def on_device():
        with counting(emulator(), device=True, sites=False):
            return run(fn, make(), "cuda-emu")
    same_outcome(on_device, lambda: run(fn, make(), "reference"))


@pytest.mark.parametrize("geometry", ["emulator", "h100"])
@pytest.mark.parametrize("name,steps", [("mlp", 3), ("llama", 2)])
def test_training_on_emulated_cuda_kernels_gives_the_cpu_hash(name, steps, geometry, monkeypatch):
    """emulator: its small launches (32 threads, 2 blocks: every grid-stride and block-stride
    path); h100: the GPU's own (256 threads, 32 blocks per SM on 132 SMs: repops/cuda/device.py),
    its warps past the first and one block per row included, affordable since the emulator's
    threads became fibers."""
    from repops.cuda.device import Device
    from repops.cuda.emulator import Emulator
    from repops.models.quick_train import quick_train
    blocks, launch = set(), Emulator.launch

    def seen(self, kernel, grid, block, *args):
        blocks.add(tuple(block))
        return launch(self, kernel, grid, block, *args)
    monkeypatch.setattr(Emulator, "launch", seen)
    if geometry == "h100":
        monkeypatch.setattr(Emulator, "elementwise_threads", Device.elementwise_threads)
        monkeypatch.setattr(Emulator, "row_threads", Device.row_threads)
        monkeypatch.setattr(Emulator, "max_blocks", 32 * 132)
    assert quick_train(name, steps, 2, "cuda-emu") == quick_train(name, steps, 2, "cpu")
    assert (max(b[0] for b in blocks) == 256) == (geometry == "h100"), blocks  # (no launch plan kept the other's)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["mlp", "llama"])
def test_twenty_steps_on_the_gpu_give_the_cpu_hash(name):
    from repops.models.quick_train import quick_train
    _table("cuda")
    gpu = quick_train(name, 20, 2, device="cuda")
    assert gpu == quick_train(name, 20, 2)
    assert sum(gpu[1][-4:]) < 0.8 * sum(gpu[1][:4])


def test_cuda_backend_without_a_device_is_a_clear_error():
    from repops.errors import BackendError
    try:
        get("cuda")
    except BackendError as e:
        assert "CuPy" in str(e)
    else:
        pytest.skip("a CUDA device is present")


@pytest.mark.gpu
def test_tensors_on_two_devices_are_a_clear_error():
    import repops
    _table("cuda")
    with pytest.raises(repops.DeviceError, match="several devices"):
        with repops.deterministic():
            torch.ones(3, device="cuda") + torch.ones(3)


# -- values crossing to the device: scalars and initial values keep every bit -------------------------
# On the H100, -0.0 as a broadcast scalar or a fold's init arrived as +0.0 (CuPy moves a 0-d
# host value by `fill`, a memset when it equals 0). The emulator's array module has the same
# trap (repops.cuda.emulator.CupyLike), so these fail here too if the glue ever moves a value.
SCALARS = [0.0, -0.0, 1e-45, -1e-45, 5.877472e-39, float("inf"), float("-inf"), float("nan"), 1.0, -3.5]
FORMS = {"0-d": lambda v: np.float32(v), "const": lambda v: P.const(v, (9,)), "1-elem": lambda v: np.full(1, v, np.float32)}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "min", "max", "fma"])
def test_special_scalars_cross_intact(emu, name, form):
    x = np.array([1.5, -2.0, 0.0, -0.0, 1e-45, -3e-39, np.inf, -np.inf, np.nan], np.float32)
    for s in SCALARS:
        v = FORMS[form](s)
        args = [(x, v), (v, x)] if name != "fma" else [(x, v, x), (v, x, x), (x, x, v)]
        for a in args:
            same(emu[name](*a), P.PRIMS[name].reference(*a))


@pytest.mark.parametrize("init", SCALARS)
def test_fold_initial_values_cross_intact(emu, init):
    rng = np.random.default_rng(7)
    for prim in (P.add, P.max_):
        for n in (0, 1, 3):
            x = operand(rng, 4 * n).reshape(4, n) if n else np.zeros((4, 0), np.float32)
            same(emu["fold"](prim, x, 1, init), ref_fold.reference(prim, x, 1, init))


def test_index_moves_keep_signed_zero_and_nan_payloads(emu):
    data = np.array([[[-0.0, 1e-45], [np.nan, -1.0]]], np.float32)
    data.view(np.uint32)[0, 1, 0] = 0x7FA00001  # a payload: index moves copy bits
    idx = np.array([[1, 0, 7, -1]], np.int64)
    for fill in (np.float32(-0.0), P.const(-0.0, ()), np.float32(1e-45)):
        same(emu["gather"](data, idx, fill), P.gather.reference(data, idx, fill))
    i = np.array([2, 0, 1], np.int64)
    for value, fill in ((P.const(-0.0, (3,)), P.const(0.0, (4,))), (np.float32([1e-45, -0.0, 2.0]), P.const(-0.0, (4,)))):
        same(emu["onehot"](i, value, fill), P.onehot.reference(i, value, fill))


def _train_subnormal(backend, device):
    """Two AdamW steps of the MLP on inputs scaled by 2^-130, fc1 without bias: its outputs,
    GELU's and the gradients flowing back are subnormal. -> (bits of the activations, the
    gradients and the parameters, how many activations were subnormal)."""
    from repops.models import build
    from repops.optim import AdamW
    import repops
    torch.manual_seed(0)
    model = build("mlp")
    with torch.no_grad():
        model.fc1.bias.zero_()  # else the bias hides the tiny products
    model = model.to(device)
    opt = AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(16, 32, generator=g) * 2.0 ** -130).to(device)
    y = torch.randint(0, 10, (16,), generator=g).to(device)
    seen, grads = [], []
    hook = model.fc1.register_forward_hook(lambda m, i, o: seen.append(o.detach().cpu()))
    with repops.deterministic(backend):
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            model.loss(x, y).backward()
            grads += [p.grad.detach().cpu().reshape(-1) for p in model.parameters()]
            opt.step()
    hook.remove()
    h = torch.cat([t.reshape(-1) for t in seen])
    sub = int(((h != 0) & (h.abs() < 2.0 ** -126)).sum())
    every = torch.cat([h, *grads] + [p.detach().cpu().reshape(-1) for p in model.parameters()])
    return every.view(torch.int32), sub


@pytest.mark.parametrize("where", ["cuda-emu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_training_with_subnormal_activations_gives_the_cpu_bits(where):
    if where == "cuda":
        _table("cuda")
    got, sub = _train_subnormal("cuda-emu" if where == "cuda-emu" else "cpu", "cpu" if where == "cuda-emu" else "cuda")
    want, _ = _train_subnormal("cpu", "cpu")
    assert sub > 100, "the case must produce subnormal activations"
    assert torch.equal(got, want)
