"""`with repops.deterministic():` runs ordinary PyTorch code on RepOps kernels: every aten
op below autograd is either a RepOps definition (repops.aten.REGISTRY), an exact data
movement (EXACT), or an UnsupportedOpError. Never a silent fall-back."""
from __future__ import annotations

import contextlib
import functools
import inspect

import torch
import torch.nn.functional as F
from torch._C import DispatchKey
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import aten as A
from . import (aten_distance, aten_embedding_bag, aten_index, aten_linalg, aten_loss, aten_math, aten_misc,  # noqa: F401
               aten_moe, aten_nn, aten_order, aten_pool, aten_reduce, aten_sort, aten_special)  # (op families: they register into A.REGISTRY)
from . import faults
from . import integer as I
from .errors import DeviceError, UnsupportedOpError
from .ops import ACTIVE


def _describe(args) -> str:
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append(f"{a.dtype}{list(a.shape)}@{a.device.type}")
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            parts.append("[" + ", ".join(f"{t.dtype}{list(t.shape)}" for t in a) + "]")
        else:
            parts.append(repr(a))
    return ", ".join(parts)


_F32 = torch.float32


def _device(func, args) -> str:
    """The one device an op runs on; CPU 0-dim tensors (wrapped scalars) go with any."""
    devices, cpu = None, False  # (the other devices' types; a CPU tensor of 1+ dims seen)
    for a in args:  # (one pass, no device objects for CPU tensors: every op comes here)
        for t in a if isinstance(a, (list, tuple)) else (a,):
            if isinstance(t, torch.Tensor):
                if t.is_cpu:
                    cpu = cpu or t.dim() > 0
                elif devices is None:
                    devices = {t.device.type}
                else:
                    devices.add(t.device.type)
    if devices is None:
        return "cpu"  # the common case
    if cpu:
        devices.add("cpu")
    if len(devices - {"meta"}) > 1:
        raise DeviceError(f"{func}: inputs on several devices ({_describe(args)}); move them to one "
                          "device first (RepOps never copies between devices behind your back)")
    if devices - {"cpu", "meta", "cuda"}:
        raise DeviceError(f"{func}: RepOps has no backend for device {sorted(devices)}; use cpu or cuda")
    if "cuda" in devices:
        return "cuda"
    return "meta" if devices == {"meta"} else "cpu"


def _integral(func, args, kwargs) -> bool:
    """True when the op computes on integers and booleans only and returns only integers and
    booleans: exact arithmetic, the same bits on every device (and torch's dtypes, overflow
    wrap-around and errors), so it runs natively. A Python float operand is fine when the result
    stays integral (a pad or fill value: torch's cast); anything that makes a float (true
    division, exp, `+ 0.5`) is not this: RepOps converts and computes."""
    if args and isinstance(args[0], torch.Tensor) and (args[0].is_floating_point() or args[0].is_complex()):
        return False  # (the common case, decided before any list is built: every float op of a step asks)
    flat = [*args, *kwargs.values()]
    flat += [v for a in flat if isinstance(a, (list, tuple)) for v in a]
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]
    if any(t.is_floating_point() or t.is_complex() for t in tensors):
        return False
    if not tensors and not any(isinstance(a, int) and not isinstance(a, bool) for a in flat):
        return False  # (Python ints alone, torch.div(n, 2, rounding_mode="trunc") as a size: torch's int64)
    # the result's dtypes follow from the op, the operands' dtypes and the non-numeric arguments
    key = (func, tuple(kwargs), tuple(_kind(a) for a in flat))
    hit = _INTEGRAL.get(key)
    if hit is None:
        meta = lambda a: a.to("meta") if isinstance(a, torch.Tensor) else (  # noqa: E731
            [meta(x) for x in a] if isinstance(a, list) else a)
        try:
            out = func(*[meta(a) for a in args], **{k: meta(v) for k, v in kwargs.items()})
            outs = out if isinstance(out, (list, tuple)) else [out]
            hit = all(not (isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex())) for o in outs)
        except Exception:  # noqa: BLE001 - no meta kernel, or torch refuses: decide by running it natively
            hit = True
        _INTEGRAL[key] = hit
    return hit


_INTEGRAL: dict = {}


def _meta_dtypes(func, args, kwargs) -> tuple | None:
    """The dtypes of func's tensor results by torch's own rules (its meta kernel), or None
    where it has none. Cached by the operands' dtypes and the non-tensor arguments."""
    flat = [*args, *kwargs.values()]
    flat += [v for a in flat if isinstance(a, (list, tuple)) for v in a]
    # (0-dim or not is part of the key: torch promotes a 0-dim operand as a wrapped scalar)
    key = (func, tuple(kwargs), tuple((_kind(a), a.dim() == 0) if isinstance(a, torch.Tensor) else _kind(a)
                                      for a in flat))
    if key not in _DTYPES:
        meta = lambda a: a.to("meta") if isinstance(a, torch.Tensor) else (  # noqa: E731
            [meta(x) for x in a] if isinstance(a, list) else a)
        try:
            out = func(*[meta(a) for a in args], **{k: meta(v) for k, v in kwargs.items()})
            outs = out if isinstance(out, (list, tuple)) else [out]
            _DTYPES[key] = tuple(o.dtype for o in outs if isinstance(o, torch.Tensor))
        except Exception:  # noqa: BLE001 - no meta kernel: the definition's own checks decide
            _DTYPES[key] = None
    return _DTYPES[key]


_DTYPES: dict = {}


def _check_float32(func, args, kwargs):
    """RepOps computes binary32: a 0-dim operand of another float dtype is taken (as torch's
    wrapped scalar) only where torch's result is float32 too (next to a float32 tensor); where
    torch would return float64 / float16 / bfloat16, the result would silently be float32:
    refused instead. (A larger operand of another dtype is refused by the definition.)"""
    scalar = False
    for a in (*args, *kwargs.values()) if kwargs else args:
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, torch.Tensor) and t.dtype is not _F32 and (t.is_floating_point() or t.is_complex()):
                if t.dim():
                    return  # refused by the definition itself (aten.np_), with its message
                scalar = True
    if not scalar:
        return
    dtypes = _meta_dtypes(func, args, kwargs)
    wrong = [d for d in dtypes or () if (d.is_floating_point or d.is_complex) and d != torch.float32]
    if wrong:
        raise A.dtype_error(str(func), wrong[0], args)


def _kind(a):
    if isinstance(a, torch.Tensor):
        return a.dtype
    if isinstance(a, (bool, int, float, complex)):
        return type(a)
    if isinstance(a, (list, tuple)):
        return len(a)  # (its elements are in `flat` too)
    return a if isinstance(a, (str, torch.dtype, torch.device, torch.layout, torch.memory_format)) or a is None \
        else type(a)


def _dropout(name, p_at=1, train_at=2, portable=False):
    """portable: element dropout, which RepOps draws from its own generator (repops.random);
    feature and alpha dropout have no RepOps definition."""
    def handler(*args, **kwargs):
        p = kwargs.get("p", args[p_at] if len(args) > p_at else 0.5)
        training = kwargs.get("training", kwargs.get("train", args[train_at] if len(args) > train_at else True))
        if not training or p == 0:
            return args[0]
        from . import random
        if portable:
            inplace = kwargs.get("inplace", args[3] if len(args) > 3 else False)
            return random.dropout(args[0], p, bool(inplace), name)
        raise UnsupportedOpError(f"{name} with p={p} in training: RepOps defines element dropout only "
                                 "(nn.Dropout, F.dropout); use it, or set this probability to 0 (or call model.eval())")
    return handler


def _max_pool(nd):
    def handler(*args, **kwargs):
        from .ops import max_pool
        return max_pool(nd, *args, **kwargs)
    return handler


def _sdpa(*args, **kwargs):
    from .ops import sdpa
    return sdpa(*args, **kwargs)


def _mha(*args, **kwargs):
    """nn.MultiheadAttention without weights calls F.scaled_dot_product_attention from inside
    Python, where this mode is popped and the call would reach aten as a device-specific
    fused kernel; with weights it is a plain composition of aten ops (bmm, softmax), the same
    on every device. Same outputs; the weights are dropped when not asked for. Its dropout of
    the weights (popped mode: torch's generator) is made RepOps' while it runs."""
    call = inspect.signature(F.multi_head_attention_forward).bind(*args, **kwargs)
    want = call.arguments.get("need_weights", True)
    call.arguments["need_weights"] = True
    with _portable_dropout_in_functional():
        out, weights = F.multi_head_attention_forward(*call.args, **call.kwargs)
    return out, (weights if want else None)


@contextlib.contextmanager
def _portable_dropout_in_functional():
    """While torch's multi_head_attention_forward runs (this mode popped), its dropout of the
    attention weights (a call of its module's global `dropout`) is RepOps' (repops/random.py)."""
    from .random import dropout
    native = F.dropout

    def portable(input, p=0.5, training=True, inplace=False):
        return dropout(input, p, inplace, "nn.MultiheadAttention's dropout") if training and p else input
    F.dropout = portable
    try:
        yield
    finally:
        F.dropout = native


@functools.cache
def _functions() -> dict:
    """What RepOpsFunctions routes, by the function torch calls (Python API, builtin, or aten
    op in an exported graph) -> handler with the same arguments."""
    from .rnn import recurrent
    aten, VF = torch.ops.aten, torch._C._VariableFunctions
    table = {F.scaled_dot_product_attention: _sdpa, aten.scaled_dot_product_attention.default: _sdpa,
             F.multi_head_attention_forward: _mha}
    for f in (F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout,
              VF.dropout, VF.feature_dropout, VF.alpha_dropout, VF.feature_alpha_dropout, aten.dropout.default,
              aten.feature_dropout.default, aten.alpha_dropout.default, aten.feature_alpha_dropout.default):
        table[f] = _dropout(getattr(f, "__name__", str(f)), portable=f in (F.dropout, VF.dropout, aten.dropout.default))
    for nd in (1, 2, 3):
        for f in (getattr(F, f"max_pool{nd}d"), getattr(VF, f"max_pool{nd}d"), getattr(aten, f"max_pool{nd}d").default):
            table[f] = _max_pool(nd)
    for kind in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
        table[getattr(VF, kind)] = recurrent(kind)
    for f in (F.batch_norm, F.instance_norm, VF.batch_norm, aten.batch_norm.default, VF.instance_norm,
              aten.instance_norm.default):
        table[f] = _without_cudnn(f)
    from .draws import functions
    table.update(functions())  # torch.rand, randn, bernoulli, ...: Philox draws inside a key (repops/draws.py)
    table.update(aten_moe.functions())  # grouped matmuls as repops::grouped_mm (repops/aten_moe.py)
    table.update(aten_misc.functions())  # grid sampling, masked_scatter above autograd (repops/aten_misc.py)
    return table


def _without_cudnn(norm):
    """Batch and instance norm run aten.cudnn_batch_norm on CUDA tensors when cuDNN is enabled.
    F.* pass torch.backends.cudnn.enabled as the 9th argument of torch.* and aten, and on the
    H100 (torch 2.11) an aten.batch_norm with that argument False still chose cuDNN while the
    flag was set: both off, every device runs aten.native_batch_norm, the op RepOps defines."""
    def run(*args, **kwargs):
        if norm not in (F.batch_norm, F.instance_norm):
            if len(args) > 8:
                args = (*args[:8], False, *args[9:])
            else:
                kwargs["cudnn_enabled"] = False
        with _cudnn_off():
            return norm(*args, **kwargs)
    return run


@contextlib.contextmanager
def _cudnn_off():
    """torch.backends.cudnn.enabled = False for the block, also where a program froze torch's
    backend flags (torch.backends.disable_global_flags: torch's own test databases do on
    import; setting a flag then raises RuntimeError). torch's flags() context manager sets
    every cuDNN flag; this sets only `enabled`, the way it does (allowing the mutation)."""
    allow = getattr(torch.backends, "__allow_nonbracketed_mutation", contextlib.nullcontext)
    was = torch.backends.cudnn.enabled
    with allow():
        torch.backends.cudnn.enabled = False
    try:
        yield
    finally:
        with allow():
            torch.backends.cudnn.enabled = was


def _without_overlap(func, args) -> list:
    """A decomposition's tensor arguments that it only reads, each with no two elements at one
    address: torch's decompositions copy an input keeping its strides (clone_preserve_strides)
    and write into views of the copy, which for an expanded input (the gradient of a sum:
    stride 0) writes several elements to one place, or raises. A contiguous copy (a traced
    clone: exact) has the same values."""
    if _is_view(func):
        return list(args)  # (a view of the input is what it must return: strides are no hazard there)
    written = {i for i, a in enumerate(func._schema.arguments) if a.alias_info is not None and a.alias_info.is_write}
    return [a.clone(memory_format=torch.contiguous_format)
            if i not in written and isinstance(a, torch.Tensor) and a.numel() > 1 and torch._debug_has_internal_overlap(a)
            else a for i, a in enumerate(args)]


def _is_view(func) -> bool:
    return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)


def _still_a_view(func, args, out):
    """A view op's decomposition must return a view of its input: one that returns a copy would
    let a write through the "view" miss the base, silently (so it is refused)."""
    if _is_view(func) and isinstance(args[0], torch.Tensor):
        base = args[0].untyped_storage().data_ptr()
        outs = out if isinstance(out, (list, tuple)) else [out]
        if any(isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() != base for o in outs):
            raise UnsupportedOpError(f"{func} (args: {_describe(args)}): torch's decomposition of this view op "
                                     "returns a copy, not a view; RepOps does not define it")
    return out


_PRIMS_RUNNING: set = set()  # prims whose aten kernel is running (a prim met again inside is refused)


@functools.cache
def _decompositions() -> dict:
    """torch's decomposition table (torch._decomp.decomposition_table): op -> a Python
    composition of other aten ops."""
    from torch._decomp import decomposition_table
    return dict(decomposition_table)


def _per_tensor(func, args, kwargs):
    """torch._foreach_<op>(lists, ...) as <op> on each i-th element (what the single-tensor
    loop calls), and RepOps' group ops as theirs (aten.PER_TENSOR): a list argument as long as
    the first is zipped, anything else is shared."""
    name = func._schema.name.split("::")[1].removeprefix("_foreach_")
    single = A.PER_TENSOR.get(func) or _FOREACH_AS.get(name) or getattr(torch.ops.aten, name)
    n = len(args[0])
    zipped = lambda a: isinstance(a, (list, tuple)) and len(a) == n  # noqa: E731
    outs = [single(*[x[i] if zipped(x) else x for x in args], **{k: (v[i] if zipped(v) else v) for k, v in kwargs.items()})
            for i in range(n)]
    return None if name.endswith("_") else outs


_FOREACH_AS = {"norm": lambda t, ord=2, dtype=None: torch.ops.aten.linalg_vector_norm(t, ord, dtype=dtype)}


def _optimizer_guard(optimizer, args, kwargs):
    """torch's Adam-family optimizers compute bias corrections on the host with `**` (the C
    library's pow, not the same bits on every machine); SGD's arithmetic is all tensor ops."""
    from . import optim
    allowed = (torch.optim.SGD, *(c for c in vars(optim).values() if isinstance(c, type)
                                  and issubclass(c, torch.optim.Optimizer)))
    if not isinstance(optimizer, allowed):
        raise UnsupportedOpError(
            f"torch.optim.{type(optimizer).__name__}.step() inside repops.deterministic(): its host-side scalar "
            "math (bias corrections with the C library's pow) is not the same on every machine. Use "
            "repops.optim.AdamW or repops.optim.Adam (binary32 bias corrections), or torch.optim.SGD")


class RepOpsFunctions(TorchFunctionMode):
    """Above autograd, where torch still calls functions by name: what decomposes differently
    per device (attention, max pooling's int64 indices, recurrent layers) or draws random
    numbers (dropout) is routed before it does, to one RepOps op or composition that is the
    same on every device (_functions). Dropout is the identity when inactive, RepOps' portable
    dropout inside repops.dropout_key (repops/random.py), refused otherwise; autocast is refused."""

    def __init__(self):
        super().__init__()
        self.table = _functions()
        self._active: list = []

    def __enter__(self):
        self._active.append(ACTIVE.set(True))
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            ACTIVE.reset(self._active.pop())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
            raise UnsupportedOpError("torch.autocast (mixed precision) inside repops.deterministic(): RepOps computes "
                                     "in binary32 only, and bf16/fp16 kernels differ across devices; remove the "
                                     "autocast context (the model and data stay float32)")
        handler = self.table.get(func)
        if handler is None and isinstance(func, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
            handler = aten_moe.custom_route(func)  # a library's op registered after the table was built
        # torch pops this mode while a function runs: what a Python function of torch calls
        # inside is seen only below autograd, as aten ops (hence _mha)
        return (handler or func)(*args, **kwargs)


_RANDOM = {f"aten::{n}" for n in (
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal", "normal_", "uniform_",
    "bernoulli", "bernoulli_", "multinomial", "exponential_", "random_", "cauchy_", "log_normal_", "geometric_",
    "native_dropout", "poisson", "rrelu_with_noise")}


def _row_major(func, out):
    """A RepOps kernel returns a fresh row-major tensor where torch's meta function follows
    its inputs' strides (a product with a transposed operand): on meta the result must have
    the real layout, or a later reshape is a view on meta and a copy for real, and the graph
    a client commits is not the trace an honest trainer records."""
    if any(r.alias_info is not None for r in func._schema.returns):
        return out  # a view or an in-place op: torch's layout is RepOps' too
    fresh = lambda t: t.new_empty(t.shape) if isinstance(t, torch.Tensor) and not t.is_contiguous() else t  # noqa: E731
    return type(out)(fresh(t) for t in out) if isinstance(out, (tuple, list)) else fresh(out)


_ALIAS, _PER_TENSOR, _EXACT, _EMPTY, _VIEW, _CHOICE = 1, 2, 4, 8, 16, 32


@functools.cache
def _kinds() -> dict:
    """op -> its flags in aten's fixed tables (ALIASES, PER_TENSOR, EXACT, EMPTY, LIBRARY_CHOICES: complete once
    every op family is imported, as it is when this module is), and _VIEW: an EXACT op whose
    schema returns a view (it computes nothing: untraced, torch's own call and no more)."""
    kinds: dict = {}
    for flag, ops in ((_ALIAS, A.ALIASES), (_PER_TENSOR, A.PER_TENSOR), (_EXACT, A.EXACT), (_EMPTY, A.EMPTY),
                      (_CHOICE, A.LIBRARY_CHOICES)):
        for op in ops:
            kinds[op] = kinds.get(op, 0) | flag
    for op in A.EXACT:
        if op.is_view:
            kinds[op] |= _VIEW
    return kinds


_FIXED: dict = {}  # id(op) -> (op, its _kinds() flags, its namespace): what never changes per op


def _fixed(func) -> tuple:
    fixed = _FIXED[id(func)] = (func, _kinds().get(func, 0), getattr(func, "namespace", None))  # (op held: its id stays its own)
    return fixed


class RepOpsMode(TorchDispatchMode):
    fuses = True  # repops/ops.py's wrappers call their fused op under it

    def __init__(self, trace=None, cuda_table=None):
        super().__init__()
        # optional callback(func, args, kwargs, out) after each op, and trace.before(func, args,
        # kwargs) before it if it has that attribute: the Verde recorder hooks here
        self.trace = trace
        self._cuda_table = cuda_table  # () -> the CUDA backend table, built on first CUDA op
        self.faults = None  # the block's faults.state(), for the ops autograd runs on its device thread

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        fixed = _FIXED.get(id(func))  # (by id: an OpOverload hashes in Python)
        if fixed is None or fixed[0] is not func:
            fixed = _fixed(func)
        _, kind, namespace = fixed
        if kind & (_ALIAS | _CHOICE):  # never a node
            if kind & _CHOICE:  # (before the device check: torch asks with its CPU-held lengths too)
                return A.LIBRARY_CHOICES[func]
            out = func(*args, **kwargs)  # the trace binds the alias to its source (aten.ALIASES)
            if self.trace is not None and hasattr(self.trace, "alias"):
                self.trace.alias(args[0], out)
            return out
        if kind & _VIEW and self.trace is None:  # (two thirds of a step's dispatches: t, view, transpose, ...)
            return func(*args, **kwargs)  # what the EXACT branch below calls, without its bookkeeping
        if kind & _PER_TENSOR and self.trace is not None:
            with self:  # traced: the single-tensor op per element, the protocol's nodes
                return _per_tensor(func, args, kwargs)
        impl = A.REGISTRY.get(func)
        device = _device(func, args)
        # integer ops on meta too: the graph of a step (shapes only) must have the trace's nodes
        listed = kind & _EXACT
        exact = listed or (namespace == "aten" and _integral(func, args, kwargs))
        if impl is not None and not exact and device != "meta":
            _check_float32(func, args, kwargs)
        traced = self.trace is not None and namespace != "profiler" and (
            impl is not None or exact)  # profiler marks compute nothing; composites decompose
        if traced and hasattr(self.trace, "before"):
            self.trace.before(func, args, kwargs)  # inputs as they are BEFORE an in-place op runs
        if exact and device == "cpu" and (not listed or I.applies(func, args, kwargs)):
            out = I.run(func, args, kwargs)  # integers and booleans: exact (native, or the kernels of a dispute)
        elif exact and not listed:
            out = I.native(func, args, kwargs)  # integers and booleans: exact, and torch's own semantics
        elif impl is not None and device == "meta":
            out = _row_major(func, func(*args, **kwargs))  # shapes only, no values: the graph of a step (Verde)
        elif impl is not None and device == "cuda":
            from .cuda.device import torch_stream
            from .reference.prims import implementations
            with implementations(self._cuda_table()), torch_stream(), faults.in_state(self.faults):
                out = impl(*args, **kwargs)
        elif impl is not None:
            out = impl(*args, **kwargs)
        elif listed or namespace == "profiler":
            out = func(*args, **kwargs)
            if kind & _EMPTY and device != "meta":
                out.zero_()
        elif func.name().startswith("aten::_foreach_"):
            with self:  # one op per tensor, traced as the single-tensor loop would be
                return _per_tensor(func, args, kwargs)
        elif func.has_kernel_for_dispatch_key(DispatchKey.CompositeImplicitAutograd):
            # A composite op (linear, layer_norm, ...) reaching us whole (inference_mode skips
            # autograd's decomposition). Decompose it with this mode re-entered, so each piece
            # runs on RepOps in torch's fixed order, exactly as under autograd.
            with self:
                return func.decompose(*args, **kwargs)
        elif func._schema.name in _RANDOM:
            from .draws import refused
            raise refused(str(func))
        elif namespace == "prims" and getattr(func, "impl_aten", None) is not None and func not in _PRIMS_RUNNING:
            # a prim that torch's decompositions reach (torch._refs): torch's own eager kernel of
            # it is an aten op (prims.ne: torch.ne), run on RepOps; one that leads back to itself
            # (prims.sign -> aten.sign -> its decomposition -> prims.sign) is refused below
            _PRIMS_RUNNING.add(func)
            try:
                with self:
                    out = func.impl_aten(*args, **kwargs)
            finally:
                _PRIMS_RUNNING.discard(func)
        elif (decomposition := _decompositions().get(func)) is not None:
            # torch's own decomposition (torch._decomp, what torch.export and Inductor lower
            # with): a fixed composition of aten ops, each run on RepOps with this mode re-entered,
            # as for a composite op above. What it reaches that RepOps lacks is refused there.
            try:
                with self:
                    out = decomposition(*_without_overlap(func, args), **kwargs)
            except UnsupportedOpError as e:  # named as the op called, and the piece RepOps lacks
                lacks = getattr(e, "lacks", str(e))
                err = UnsupportedOpError(f"{func} (args: {_describe(args)}): torch's decomposition of it reaches "
                                         f"what RepOps lacks: {lacks}")
                err.lacks = lacks
                raise err from e
            if out is not NotImplemented:  # (a decomposition that does not apply to these arguments)
                return _still_a_view(func, args, out)
            raise UnsupportedOpError(f"{func} is not implemented by RepOps for these arguments ({_describe(args)}), "
                                     "nor by torch's decomposition of it")
        elif func.name().startswith("aten::_fft_"):
            raise UnsupportedOpError(f"{func} is not implemented by RepOps (args: {_describe(args)}). {_NO_FFT}")
        else:
            raise UnsupportedOpError(f"{func} is not implemented by RepOps (args: {_describe(args)}). "
                                     "Add a definition in repops/aten.py, or keep this op out of "
                                     "repops.deterministic().")
        if traced:
            self.trace(func, args, kwargs, out)
        return out


# torch.fft (FNet's token mixing, stft): no FFT is defined, its results are complex (outside binary32) and
# its rounding is its algorithm's; the same transform as real matmuls with constant matrices is defined
_NO_FFT = ("RepOps has no FFT: its results are complex numbers, outside RepOps' binary32 spec, and an FFT's "
           "rounding depends on its algorithm. Write the transform as real matrix products instead: the real and "
           "imaginary parts of a DFT of length n along a dimension are x @ C and x @ S with the constant matrices "
           "C[j, k] = cos(2 pi j k / n), S[j, k] = -sin(2 pi j k / n) (RepOps' fixed-order matmul; FNet's mixing "
           "Re(FFT2(x)) is C_seq @ x @ C_hidden - S_seq @ x @ S_hidden), or keep this op out of "
           "repops.deterministic().")


@contextlib.contextmanager
def deterministic(backend: str = "cpu", trace=None):
    """Run the enclosed PyTorch code with RepOps semantics. backend: the kernels for CPU
    tensors: "cpu" (compiled), "reference" (the numpy spec itself; slow) or "cuda-emu" (the
    CUDA sources emulated; slower). CUDA tensors always run the "cuda" backend (CuPy).
    A fault found on the device is raised when the block ends (repops.faults.deferred: no
    sync per check), unless the trace records each op's inputs (`trace.before`: a step
    recorder, whose fault must be raised at its op)."""
    from . import faults
    from .backends import get
    from .cpu.build import lib
    from .reference.prims import implementations
    table = get(backend)
    cuda_table = functools.cache(lambda: get("cuda"))  # built on the first op on CUDA tensors
    # numpy's elementwise kernels run in this thread under its MXCSR: force IEEE modes
    # (no FTZ/DAZ, round-to-nearest) for the block, whatever the process had set.
    csr = lib().repops_mxcsr_ieee()
    guard = register_optimizer_step_pre_hook(_optimizer_guard)
    try:
        with implementations(table), RepOpsFunctions(), RepOpsMode(trace, cuda_table) as mode, \
                faults.deferred(trace is None or not hasattr(trace, "before")):
            mode.faults = faults.state()
            yield
    finally:
        guard.remove()
        lib().repops_mxcsr_set(csr)
