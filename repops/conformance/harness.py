"""One OpInfo sample or one ModuleInfo input, run natively and under RepOps, classified:
pass (native's result to rounding, forward and gradients of the sum of the outputs, and the
same bits on 1 and 2 threads), refused (RepOps' own error, with its message), WRONG (another
result, shape or dtype) or FOREIGN (any other exception type under RepOps)."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import warnings

import torch
from torch.utils._pytree import tree_flatten, tree_map

import repops
from repops.errors import RepOpsError
from repops.models.quick_train import num_threads

PASS, REFUSED, WRONG, FOREIGN = "pass", "refused", "WRONG", "FOREIGN"
SEVERITY = {PASS: 0, REFUSED: 1, FOREIGN: 2, WRONG: 3}
# RepOps' results are binary32 to rounding, but its folds run in another order than torch's
# (and its exp/log are correctly rounded where torch's are not): a difference beyond this is
# not rounding.
RTOL, ATOL = 1e-4, 1e-5
OBSERVER = None  # () -> a dispatch mode pushed inside RepOps' runs (report.Observe), or None


@dataclasses.dataclass
class Outcome:
    status: str
    detail: str = ""

    def worse(self, other: "Outcome") -> "Outcome":
        return other if SEVERITY[other.status] > SEVERITY[self.status] else self


def _clone(x):
    """A fresh copy of every tensor in a sample (in-place ops and autograd must not see the
    other run's tensors); requires_grad kept, leaves again."""
    def one(t):
        if not isinstance(t, torch.Tensor):
            return t
        c = t.detach().clone()
        return c.requires_grad_(t.requires_grad) if c.is_floating_point() or c.is_complex() else c
    return tree_map(one, x)


def _grads(outputs, inputs):
    """Gradients of the sum of every float output with respect to the inputs that require
    them (None where an input is unused); no gradient when nothing differentiable came out."""
    outs = [o for o in tree_flatten(outputs)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
    wrt = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not wrt:
        return None
    total = sum(o.sum() for o in outs)
    return torch.autograd.grad(total, wrt, allow_unused=True)


def _leaves(x) -> list:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def run(fn, inputs_of, *, backward: bool, under_repops: bool, n_threads: int | None = None):
    """fn() -> outputs; inputs_of() -> the tensors whose gradients are compared. Returns
    (outputs, grads) detached."""
    ctx = repops.deterministic() if under_repops else contextlib.nullcontext()
    thr = num_threads(n_threads) if n_threads else contextlib.nullcontext()
    seen = OBSERVER() if under_repops and OBSERVER else contextlib.nullcontext()
    with thr, ctx, seen, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn()
        grads = _grads(out, inputs_of()) if backward else None
    detach = lambda t: t.detach() if isinstance(t, torch.Tensor) else t  # noqa: E731
    return tree_map(detach, out), (None if grads is None else tuple(grads))


def _describe(t) -> str:
    return f"{t.dtype}{list(t.shape)}" if isinstance(t, torch.Tensor) else repr(t)[:60]


def differ(native, mine, values: bool = True) -> str:
    """'' when mine is native's result to rounding (structure, shapes, dtypes, values with NaN
    equal to NaN); otherwise what differs."""
    a, spec_a = tree_flatten(native)
    b, spec_b = tree_flatten(mine)
    if len(a) != len(b):
        return f"{len(b)} results, native {len(a)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return f"result {i}: {_describe(y)}, native {_describe(x)}"
        if not isinstance(x, torch.Tensor):
            if x != y and not (x != x and y != y):
                return f"result {i}: {y!r}, native {x!r}"
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"result {i}: {_describe(y)}, native {_describe(x)}"
        if not values or x.layout != torch.strided or x.is_quantized:
            continue
        try:
            torch.testing.assert_close(y, x, rtol=RTOL, atol=ATOL, equal_nan=True, check_stride=False,
                                       check_layout=False)
        except AssertionError as e:
            lines = [s.strip() for s in str(e).splitlines() if s.strip()]
            return f"result {i} ({_describe(x)}): " + "; ".join(lines[1:4])
    return ""


def _bytes(t):
    """A fresh dense copy's bytes (an expanded tensor's stride 0 cannot be viewed)."""
    return torch.empty(t.shape, dtype=t.dtype).copy_(t.detach()).reshape(-1).view(torch.uint8)


def same_bits(a, b) -> str:
    """'' when every tensor of a and b has the same bits (NaN payloads included)."""
    for i, (x, y) in enumerate(zip(_leaves(a), _leaves(b))):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"result {i}: {_describe(y)} vs {_describe(x)}"
        if x.layout == torch.strided and x.numel() and not torch.equal(_bytes(x), _bytes(y)):
            return f"result {i} ({_describe(x)}): bits differ"
    return ""


def compare(make, *, backward: bool, values: bool = True, thread_check: bool = True) -> Outcome:
    """make(cast) -> (fn, inputs_of): a fresh closure over fresh copies of the inputs (cast:
    their float32 tensors to binary64, for _closer_to_float64), for each run.
    A sample native torch rejects says nothing about RepOps: None."""
    try:
        fn, inputs_of = make()
        native = run(fn, inputs_of, backward=backward, under_repops=False)
    except Exception:  # noqa: BLE001 - torch itself rejects the sample (or its gradient)
        if not backward:
            return None
        return compare(make, backward=False, values=values, thread_check=thread_check)
    try:
        fn, inputs_of = make()
        mine = run(fn, inputs_of, backward=backward, under_repops=True, n_threads=1 if thread_check else None)
    except RepOpsError as e:
        return Outcome(REFUSED, f"{type(e).__name__}: {_first_line(e)}")
    except Exception as e:  # noqa: BLE001 - anything else is a defect
        return Outcome(FOREIGN, f"{type(e).__name__}: {_first_line(e)}")
    what = differ(native, mine, values)
    if what and _closer_to_float64(make, backward, native, mine):
        what = ""  # native's float32 rounding, not RepOps', is what differs (RepOps matches binary64)
    if what:
        return Outcome(WRONG, what)
    if thread_check:
        try:
            fn, inputs_of = make()
            two = run(fn, inputs_of, backward=backward, under_repops=True, n_threads=2)
        except Exception as e:  # noqa: BLE001
            return Outcome(FOREIGN, f"on 2 threads: {type(e).__name__}: {_first_line(e)}")
        if values and (bits := same_bits(mine, two)):
            return Outcome(WRONG, "1 vs 2 threads: " + bits)
    return Outcome(PASS)


def _closer_to_float64(make, backward, native, mine) -> bool:
    """Where RepOps and native float32 differ beyond the tolerance, the same sample natively
    in binary64 decides: RepOps' result is rounding when, tensor by tensor, its largest error
    against binary64 is at most 4x native float32's (+ ATOL). (A layer norm of one element:
    x - mean is 0 exactly, native's rounding residue times rstd = 316 gave 2.4e-5; an
    attention gradient summed over a broadcast axis: errors 4.4e-5 vs native's 2.6e-5 on
    values up to 53.) Not for a different shape, dtype or NaN pattern: those are wrong."""
    if differ(native, mine, values=False):
        return False

    def wide(x):
        return tree_map(lambda t: t.detach().double().requires_grad_(t.requires_grad)
                        if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t, x)
    try:
        fn, inputs_of = make(wide)
        exact = run(fn, inputs_of, backward=backward, under_repops=False)
    except Exception:  # noqa: BLE001 - no binary64 variant: native float32 stands
        return False
    trio = list(zip(_leaves(native), _leaves(mine), _leaves(exact)))
    if len(trio) != len(_leaves(native)):
        return False
    for a, b, c in trio:
        if not (a.dtype == torch.float32 and c.dtype == torch.float64 and a.layout == torch.strided):
            if not torch.equal(a, b):
                return False
            continue
        if not torch.equal(b.isnan(), c.isnan()) or not torch.equal(b.isinf() & (b == c), b.isinf()):
            return False
        finite = c.isfinite()
        err_mine = (b.double() - c)[finite].abs().max() if finite.any() else 0
        err_native = (a.double() - c)[finite].abs().max() if finite.any() else 0
        if err_mine > 4 * err_native + ATOL:
            return False
    return True


def _first_line(e) -> str:
    s = str(e).strip().splitlines()
    return (s[0] if s else "")[:300]


# -- OpInfo ------------------------------------------------------------------------------------------------
def float32_opinfos():
    from torch.testing._internal.common_methods_invocations import op_db
    return [o for o in op_db if torch.float32 in o.supported_dtypes("cpu")]


def opinfo_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def opinfo_samples(op, limit: int | None = None, reference: bool = False):
    """reference: the OpInfo's reference inputs (its samples, then extremal values: inf, NaN,
    huge and tiny magnitudes, -0, noncontiguous and broadcast layouts), where it has them;
    forward only (some databases make none with gradients: where's complex scalars)."""
    backward = not reference and op.supports_autograd and torch.float32 in op.supported_backward_dtypes("cpu")
    torch.manual_seed(0)
    make = op.reference_inputs if reference else op.sample_inputs
    samples = make("cpu", torch.float32, requires_grad=backward)
    out = []
    for i, s in enumerate(samples):
        if limit is not None and i >= limit:
            break
        out.append(s)
    return out, backward


def check_sample(op, sample, backward: bool, thread_check: bool = True) -> Outcome | None:
    def make(cast=lambda x: x):
        s = cast(_clone((sample.input, sample.args, sample.kwargs)))

        def fn():
            return sample.output_process_fn_grad(op(s[0], *s[1], **s[2]))
        return fn, lambda: _leaves(s)
    return compare(make, backward=backward, values=not op.has_nondeterministic_output,
                   thread_check=thread_check)


def check_opinfo(op, limit: int | None = None, thread_check: bool = True,
                 reference: bool = False) -> tuple[Outcome, int]:
    """The op's worst outcome over its samples (the first of that kind), and how many ran."""
    try:
        samples, backward = opinfo_samples(op, limit, reference)
    except Exception as e:  # noqa: BLE001 - the database cannot make samples here
        return Outcome(PASS, f"no samples ({type(e).__name__})"), 0
    worst, ran = Outcome(PASS), 0
    for s in samples:
        o = check_sample(op, s, backward, thread_check)
        if o is None:
            continue
        ran += 1
        worst = worst.worse(o)
    return worst, ran


# -- ModuleInfo ------------------------------------------------------------------------------------------
def float32_moduleinfos():
    from torch.testing._internal.common_modules import module_db
    return [m for m in module_db if torch.float32 in m.supported_dtypes("cpu")]


def module_inputs(info, limit: int | None = None):
    torch.manual_seed(0)
    inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=True, training=True)
    return inputs[:limit] if limit is not None else inputs


def check_module_input(info, mi, thread_check: bool = True) -> Outcome | None:
    if mi.forward_input is None:
        return None
    args, kwargs = mi.constructor_input.args, mi.constructor_input.kwargs
    try:
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = info.module_cls(*args, **kwargs).to(torch.float32)
        module.train()
    except Exception:  # noqa: BLE001 - torch cannot build it here
        return None

    def make(cast=None):
        m = copy.deepcopy(module)
        f = _clone((mi.forward_input.args, mi.forward_input.kwargs))
        if cast is not None:
            m, f = m.double(), cast(f)
        return (lambda: m(*f[0], **f[1])), (lambda: _leaves(f) + list(m.parameters()))
    return compare(make, backward=True, thread_check=thread_check)


def check_moduleinfo(info, limit: int | None = None, thread_check: bool = True) -> tuple[Outcome, int]:
    try:
        inputs = module_inputs(info, limit)
    except Exception as e:  # noqa: BLE001
        return Outcome(PASS, f"no inputs ({type(e).__name__})"), 0
    worst, ran = Outcome(PASS), 0
    for mi in inputs:
        o = check_module_input(info, mi, thread_check)
        if o is None:
            continue
        ran += 1
        worst = worst.worse(o)
    return worst, ran
