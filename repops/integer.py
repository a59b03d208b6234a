"""Integer and boolean aten ops as compositions of the integer kernels
(repops/reference/integers.py, docs/NUMERICS.md §13): what a dispute decomposes them into.

Training runs them natively (`integer` below is overridden by every compiled backend's table:
torch's integers are exact, so native is the same bits everywhere); the reference backend and
a dispute's decomposition (prims.observe) run these definitions, which the tests hold to
torch's own results bit for bit. An op with no definition here, or on a dtype other than
int64/int32/bool, runs natively: its node is then not settleable on chain (`verde post` says
which)."""
from __future__ import annotations

import numpy as np
import torch

from . import faults
from .aten import arr, registrar, take_along, tensor
from .reference import integers as I
from .reference import ordering as O
from .reference import prims as P
from .reference.fold import sum_dims

aten = torch.ops.aten
DT = {torch.int64: "i64", torch.int32: "i32", torch.bool: "bool"}
REGISTRY: dict = {}
register = registrar(REGISTRY)


def K(op: str, dt: str):
    return I.KERNELS[f"{op}.{dt}"]


def operand(v, dt: str):
    """A tensor (cast by a to_<dt> kernel when its dtype differs) or a Python number (a
    constant) as an operand of dtype dt."""
    if isinstance(v, torch.Tensor):
        a = v.detach().numpy()
        return a if DT[v.dtype] == dt else K(f"to_{dt}", DT[v.dtype])(a)
    return I.const(v, dt)


def result(a) -> torch.Tensor:
    """A kernel's output (or a view of one) as the op's result: the same memory, so a
    decomposition describes the result as that kernel's output."""
    return torch.from_numpy(np.asarray(a))


def _common(a, b) -> str:
    """torch's promotion of two operands (a tensor and a tensor or a number)."""
    return DT[torch.result_type(a, b)]


def _inplace(self: torch.Tensor, out):
    """An in-place op: self now holds `out`, and the decomposition's last kernel is a copy
    whose output IS self (prims.wrote's rule for integers)."""
    mine, dt = self.detach().numpy(), DT[self.dtype]
    if I.dtype_name(out) != dt:  # torch casts an in-place result to self's dtype
        out = K(f"to_{dt}", I.dtype_name(out))(out)
    mine[...] = out
    P.wrote(mine, out, f"copy.{dt}")
    return self


def _both(fn, *inplace_ops):
    """fn as the op, and `result into self` for its in-place variants."""
    def inplace(self, *args, **kwargs):
        out = fn(self, *args, **kwargs)
        return _inplace(self, out.numpy())
    register(*inplace_ops)(inplace)
    return fn


DIVISIONS = ("div_floor", "div_trunc", "rem_floor", "rem_trunc")


def _binary(op: str, reflected=False):
    def impl(a, b, alpha=1):
        dt = _common(a, b)
        x, y = operand(a, dt), operand(b, dt)
        if reflected:
            x, y = y, x
        if alpha != 1:
            y = K("mul", dt)(y, I.const(alpha, dt))
        if op in DIVISIONS and dt != "bool":
            faults.divisor_nonzero(y, dt, op)
        return result(K(op, dt)(x, y))
    return impl


for _name, _op in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("remainder", "rem_floor"),
                   ("fmod", "rem_trunc"), ("bitwise_and", "and"), ("bitwise_or", "or"), ("bitwise_xor", "xor")):
    _ov = getattr(aten, _name)
    _both(register(_ov.Tensor, _ov.Scalar)(_binary(_op)), getattr(aten, _name + "_").Tensor,
          getattr(aten, _name + "_").Scalar)
register(aten.rsub.Tensor, aten.rsub.Scalar)(_binary("sub", reflected=True))
register(aten.floor_divide.default, aten.floor_divide.Scalar)(_binary("div_floor"))
register(aten.minimum.default)(_binary("min"))
register(aten.maximum.default)(_binary("max"))


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(a, b, rounding_mode=None):
    if rounding_mode not in ("floor", "trunc"):  # true division makes floats: never reaches here
        raise ValueError(f"integer division with rounding_mode={rounding_mode!r}")
    return _binary("div_floor" if rounding_mode == "floor" else "div_trunc")(a, b)


def _unary(op):
    return lambda a: result(K(op, DT[a.dtype])(a.detach().numpy()))


register(aten.neg.default)(_unary("neg"))
register(aten.abs.default)(_unary("abs"))
_both(register(aten.bitwise_not.default)(_unary("not")), aten.bitwise_not_.default)


@register(aten.logical_not.default)
def logical_not(a):
    return result(K("not", "bool")(operand(a, "bool")))


def _logical(op):
    return lambda a, b: result(K(op, "bool")(operand(a, "bool"), operand(b, "bool")))


register(aten.logical_and.default)(_logical("and"))
register(aten.logical_or.default)(_logical("or"))
register(aten.logical_xor.default)(_logical("xor"))


_FLOAT_COMPARE = {"eq": P.eq, "lt": P.lt, "le": P.le}


def _compare(op, swap=False, negate=False):
    """Integers compare exactly; against a Python float torch compares in binary32: to_f32
    of the tensor, then the binary32 comparison primitive."""
    def cmp(a, b):
        promoted = torch.result_type(a, b)
        if promoted == torch.float32:
            x, y = (K("to_f32", DT[v.dtype])(v.detach().numpy()) if isinstance(v, torch.Tensor) else
                    np.asarray(v, np.float32) for v in (a, b))
            f = _FLOAT_COMPARE[op]
        else:
            dt = DT[promoted]
            x, y, f = operand(a, dt), operand(b, dt), K(op, dt)
        r = f(y, x) if swap else f(x, y)
        return result(K("not", "bool")(r) if negate else r)
    return cmp


register(aten.eq.Tensor, aten.eq.Scalar)(_compare("eq"))
register(aten.ne.Tensor, aten.ne.Scalar)(_compare("eq", negate=True))
register(aten.lt.Tensor, aten.lt.Scalar)(_compare("lt"))
register(aten.le.Tensor, aten.le.Scalar)(_compare("le"))
register(aten.gt.Tensor, aten.gt.Scalar)(_compare("lt", swap=True))
register(aten.ge.Tensor, aten.ge.Scalar)(_compare("le", swap=True))


@register(aten.clamp.default, aten.clamp.Tensor)
def clamp(a, lo=None, hi=None):
    """max(x, lo) then min(., hi), as torch.clamp."""
    dt = DT[aten.clamp.default(a.to("meta"), *(v.to("meta") if isinstance(v, torch.Tensor) else v
                                              for v in (lo, hi))).dtype]
    x = operand(a, dt)
    x = K("max", dt)(x, operand(lo, dt)) if lo is not None else x
    x = K("min", dt)(x, operand(hi, dt)) if hi is not None else x
    return result(x)


register(aten.clamp_min.default)(lambda a, lo: clamp(a, lo, None))
register(aten.clamp_max.default)(lambda a, hi: clamp(a, None, hi))


@register(aten.where.self)
def where(cond, a, b):
    dt = _common(a, b)
    return result(K("select", dt)(operand(cond, "bool"), operand(a, dt), operand(b, dt)))


def masked_fill(a, mask, value):
    dt = DT[a.dtype]
    return result(K("select", dt)(operand(mask, "bool"), operand(value, dt), a.detach().numpy()))


_both(register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)(masked_fill), aten.masked_fill_.Scalar,
      aten.masked_fill_.Tensor)


@register(aten._to_copy.default)
def to_copy(a, dtype=None, **_):
    src, dst = DT[a.dtype], {torch.float32: "f32", **DT}[dtype or a.dtype]
    x = a.detach().numpy()
    return result(K("copy" if dst == src else f"to_{dst}", src)(x))


def _reduce(op: str, x: np.ndarray, dt: str, dims, keepdim: bool, empty: int):
    """Fold `op` over dims, each dim in increasing index order (integer arithmetic is exact:
    any order gives these bits; this one is the spec's kernel sequence)."""
    dims = sorted({d % max(x.ndim, 1) for d in (range(x.ndim) if dims is None or dims == [] else
                                                 ([dims] if isinstance(dims, int) else dims))}, reverse=True)
    acc, folded = x, False
    for d in dims if x.ndim else []:
        n = acc.shape[d]
        if n == 0:
            shape = acc.shape[:d] + acc.shape[d + 1:]
            acc, folded = K("copy", dt)(I.const(empty, dt, shape)), True
            continue
        at = lambda i: acc[(slice(None),) * d + (i,)]  # noqa: E731
        out = at(0)
        for i in range(1, n):
            out = K(op, dt)(out, at(i))
            folded = True
        acc = out
    if not folded:  # nothing to fold (one element per output): a copy, so the result is a kernel output
        acc = K("copy", dt)(acc)
    if keepdim:
        acc = acc.reshape([1 if d in dims else s for d, s in enumerate(x.shape)])
    return acc


@register(aten.sum.default, aten.sum.dim_IntList)
def sum_(a, dims=None, keepdim=False, dtype=None):
    dt = DT[dtype or (torch.int64 if a.dtype in DT else a.dtype)]
    return result(_reduce("add", operand(a, dt), dt, dims, keepdim, 0))


def _any_all(op, empty):
    def impl(a, dims=None, keepdim=False):
        return result(_reduce(op, operand(a, "bool"), "bool", dims, keepdim, empty))
    return impl


register(aten.any.default, aten.any.dim, aten.any.dims)(_any_all("or", 0))
register(aten.all.default, aten.all.dim, aten.all.dims)(_any_all("and", 1))


@register(aten.cumsum.default)
def cumsum(a, dim, dtype=None):
    """Hillis-Steele: y += y shifted by 1, 2, 4, ... along dim (ceil(log2 n) rounds of a
    shifted copy and an add; exact, so these are torch's bits)."""
    dt = DT[dtype or torch.int64]
    y = operand(a, dt)
    axis = dim % max(y.ndim, 1)
    if y.ndim == 0 or y.shape[axis] <= 1:  # nothing to add: a copy, so the result is a kernel output
        return result(K("copy", dt)(y))
    by, n = 1, y.shape[axis]
    while by < n:  # y shifted `by` up along the axis, 0 below: one placed copy (a CAT operand)
        head = y[(slice(None),) * axis + (slice(0, n - by),)]
        y = K("add", dt)(y, P.place(y.shape, axis, [(by, 1, head)], I.DTYPES[dt].type(0), K("copy", dt)))
        by *= 2
    return result(y)


def cumsum_array(a, axis: int, dtype=torch.int64):
    """cumsum of an integer kernel output along axis (in dtype), as an array of its device: on
    the host cumsum's kernels above; on a device torch's own scan, which is exact (the compiled
    backends run integer ops natively: the same bits). A composite's offsets, source indices."""
    if P.xp_of(a) is np:
        return cumsum(torch.from_numpy(np.asarray(a)), axis, dtype).numpy()
    return arr(tensor(a).cumsum(axis, dtype=dtype))


def _extreme(a, dim, keepdim, op):
    """(max or min, int64 index of its first position) along dim: a fold of max/min kernels in
    increasing position order, then the first position equal to it (reference/ordering.py)."""
    from .reference import ordering as O
    dt = DT[a.dtype]
    x = operand(a, dt)
    if x.ndim == 0:
        x = x.reshape(1)
    d = dim % x.ndim
    if x.shape[d] == 0:
        raise IndexError(f"{op}: the reduced dim {dim} has no elements (torch refuses it too)")
    moved = np.moveaxis(x, d, -1)
    m = moved[..., 0]
    for i in range(1, moved.shape[-1]):
        m = K(op, dt)(m, moved[..., i])
    m = K("copy", dt)(m) if moved.shape[-1] == 1 else m
    i = O.first_true(K("eq", dt)(moved, m[..., None])) if moved.size else K("copy", "i64")(I.const(0, "i64", m.shape))
    if keepdim and a.dim():
        return np.expand_dims(m, d), np.expand_dims(i, d)
    return m, i


def _with_index(op):
    return lambda a, dim, keepdim=False: tuple(result(v) for v in _extreme(a, dim, keepdim, op))


def _arg(op):
    def impl(a, dim=None, keepdim=False):
        if a.dtype == torch.bool:
            raise RuntimeError(f"arg{op}(): does not support bool input (torch refuses it too)")
        if dim is None:
            flat = operand(a, DT[a.dtype]).reshape(-1)  # (an operand of this op: contiguous, a view)
            i = _extreme(torch.from_numpy(flat), 0, False, op)[1]
            return result(i.reshape([1] * a.dim()) if keepdim else i)
        return result(_extreme(a, dim, keepdim, op)[1])
    return impl


register(aten.max.dim)(_with_index("max"))
register(aten.min.dim)(_with_index("min"))
register(aten.argmax.default)(_arg("max"))
register(aten.argmin.default)(_arg("min"))


@register(aten.gather.default)
def gather(a, dim, index, sparse_grad=False):
    """torch.gather of integer or bool data (RoBERTa's token types at its positions): aten's
    layout (take_along) with the copy and gather kernels of the data's dtype."""
    dt = DT[a.dtype]
    i = operand(index, "i64")
    faults.index_in_range(i, a.shape[dim % max(a.dim(), 1)] if a.dim() else 1, "gather")
    return result(take_along(a.detach().numpy(), dim, i, K("copy", dt),
                             I.KERNELS[f"gather.{dt}"], I.const(0, dt)))


@register(aten.index.Tensor)
def index(a, indices):
    """x[i0, i1, ...] by integer index tensors: the float definition's integer kernels on the
    indices (torch's negative indices wrapped, each range-checked: rule `index`) and one gather
    of x's dtype (repops/aten_index.py)."""
    from .aten_index import flat_index, gather_flat
    dt = DT[a.dtype]
    x, p, flat, _ = flat_index(a.detach().numpy(), indices, "index", K("copy", dt))
    return result(gather_flat(x, p, flat, I.KERNELS[f"gather.{dt}"], I.const(0, dt)))


# -- sort of integer keys (expert ids): stable (docs/NUMERICS.md §8, "Mixture of experts") -----------------
def sort_ints(x, dt: str, descending: bool):
    """Stable sort of integer (or bool) keys along the last axis -> (values, int64 indices):
    ordering.sort's ranks with exact comparisons: rank[i] = #{j: x_j before x_i} + #{j < i:
    x_j == x_i} (before: lt, or lt with the operands swapped when descending), index[r] = the
    sum over i of select(rank[i] == r, i, 0), values = x gathered there (gather.<dt>)."""
    K = O.K
    n = x.shape[-1]
    pos = O.positions(n)
    xi, xj = x[..., :, None], x[..., None, :]
    before = K[f"lt.{dt}"](xi, xj) if descending else K[f"lt.{dt}"](xj, xi)     # [.., i, j]: x_j before x_i
    earlier = K["lt.i64"](pos[None, :], pos[:, None])                            # [i, j]: j < i
    rank = O._count(K["or.bool"](before, K["and.bool"](K[f"eq.{dt}"](xj, xi), earlier)))
    match = K["eq.i64"](rank[..., None, :], pos[:, None])                       # [.., r, i]
    idx = O.to_index(sum_dims(O._as_f32(K["select.i64"](match, pos[None, :], O.const(0))), [-1]))
    rows = int(np.prod(x.shape[:-1]))
    data = x if x.flags.c_contiguous else K[f"copy.{dt}"](x)
    values = I.KERNELS[f"gather.{dt}"](data.reshape(rows, n, 1), idx.reshape(rows, n), I.const(0, dt))
    return values.reshape(x.shape), idx


def sortable(args, kwargs) -> bool:
    """Does sort_ints define this sort? At most ordering.MAX_SORTED keys along the dim (O(n^2)
    comparisons); a longer sort runs natively (torch's stable sort: the same order) and its
    node is not settleable (`verde post` names it)."""
    a = args[0]
    dim, _ = _sort_args(args[1:], kwargs)
    return a.dim() == 0 or a.shape[dim % a.dim()] <= O.MAX_SORTED


@register(aten.sort.default, aten.sort.stable)
def int_sort(a, *args, **kwargs):
    """aten.sort (and sort.stable) of integer or bool keys: sort_ints along dim."""
    dim, descending = _sort_args(args, kwargs)
    dt = DT[a.dtype]
    x = operand(a, dt)
    if x.ndim == 0:
        return result(O.K[f"copy.{dt}"](x)), result(O.K["copy.i64"](I.const(0, "i64")))
    d = dim % x.ndim
    v, i = sort_ints(np.moveaxis(x, d, -1), dt, descending)
    return result(np.moveaxis(v, -1, d)), result(np.moveaxis(i, -1, d))


def _sort_args(args, kwargs):
    """(dim, descending) of sort.default (self, dim=-1, descending=False) or sort.stable
    (self, *, stable, dim=-1, descending=False)."""
    if args:
        dim = args[0]
        descending = args[1] if len(args) > 1 else kwargs.get("descending", False)
    else:
        dim, descending = kwargs.get("dim", -1), kwargs.get("descending", False)
    return dim, descending


def stable_native(a, *args, **kwargs):
    """What a compiled backend runs for an integer sort: torch's STABLE sort (its default sort
    of integers is not stable: which of equal keys comes first would be its algorithm's, and
    its device's), the order sort_ints defines."""
    dim, descending = _sort_args(args, kwargs)
    return aten.sort.stable(a, stable=True, dim=dim, descending=descending)


def _indexable(args) -> bool:
    """index.Tensor: integer index tensors (a bool mask makes a shape that depends on values:
    native)."""
    return all(t is None or t.dtype in (torch.int64, torch.int32) for t in args[1]) and \
        any(t is not None for t in args[1])


def applies(func, args, kwargs) -> bool:
    """Does a definition here compute this call? Its tensors all int64/int32/bool (a cast to
    float32 too), on the CPU."""
    if func not in REGISTRY:
        return False
    flat = [*args, *kwargs.values()]
    flat += [v for a in flat if isinstance(a, (list, tuple)) for v in a]
    tensors = [t for t in flat if isinstance(t, torch.Tensor)]
    if not tensors or any(t.dtype not in DT or t.device.type != "cpu" for t in tensors):
        return False
    if func is aten._to_copy.default:
        return kwargs.get("dtype") in (None, torch.float32, *DT) and kwargs.get("device") in (None, torch.device("cpu"))
    if func in (aten.sum.default, aten.sum.dim_IntList, aten.cumsum.default):
        return kwargs.get("dtype") in (None, *DT)
    if func in _SORTS:
        return sortable(args, kwargs)
    return func is not aten.index.Tensor or _indexable(args)


@P.overridable("integer")
def run(func, args, kwargs):
    """An integral aten op: its definition here when there is one, else torch's own (exact)."""
    if applies(func, args, kwargs):
        return REGISTRY[func](*args, **kwargs)
    return native(func, args, kwargs)


def native(func, args, kwargs):
    """What every compiled backend runs for integers: torch's exact kernels, but for division
    and remainder, where torch has no portable answer (_division)."""
    if func in _DIVISION_OPS:
        return _division(func, args, kwargs)
    if func in _SORTS:  # (torch's default sort of integers is not stable: the order of equal keys would be its own)
        return stable_native(*args, **kwargs)
    if func in _RANGE_CHECKED:
        args = _RANGE_CHECKED[func](*args, **kwargs) or args
    return func(*args, **kwargs)


def _in_range(i: torch.Tensor, n: int, wraps: bool) -> torch.Tensor:
    """i with every index outside [-n, n) (or [0, n)) replaced by 0. On a GPU the range check
    is only queued (read when the block ends), and torch's own kernel would meet the bad index
    first: a device-side assert, which leaves the CUDA context unusable for the rest of the
    process. The fault is still raised at the block's end; the values past it are never used."""
    ok = (i >= (-n if wraps else 0)) & (i < n)
    return torch.where(ok, i, torch.zeros((), dtype=i.dtype, device=i.device))


def _index_ranges(a, indices):
    """Rule `index` of x[i0, i1, ...] as the definition checks it (each index wrapped, in
    turn), so torch's own kernel meets an out-of-range index as the same Fault."""
    if a.device.type == "meta" or any(t is not None and t.dtype in (torch.bool, torch.uint8) for t in indices):
        return
    used = [d for d, t in enumerate(indices) if t is not None]
    for d in used:
        i = arr(indices[d]).astype(np.int64)
        n = a.shape[d]
        faults.index_in_range(i + (i < 0) * n, n, "index", given=i, kernels=False)
    if a.device.type != "cpu":
        return a, [t if t is None else _in_range(t, a.shape[d], True) for d, t in enumerate(indices)]


def _gather_range(a, dim, index, sparse_grad=False):
    if a.device.type != "meta":
        n = a.shape[dim % a.dim()] if a.dim() else 1
        faults.index_in_range(arr(index), n, "gather", kernels=False)
        if a.device.type != "cpu":
            return a, dim, _in_range(index, n, False)  # (sparse_grad is keyword-only: it stays in kwargs)


@register(aten._assert_async.msg, aten._assert_async.default)
def assert_async(cond, msg: str = "a runtime assertion of the program is false"):
    """torch's runtime assert (torch.export writes one per torch._check; RepOps' value checks in
    composites call it): false is the fault rule `domain` (faults.holds), a fault claim."""
    faults.holds(operand(cond, "bool"), "_assert_async", msg)


def _asserted(cond, msg: str = "a runtime assertion of the program is false"):
    if cond.device.type != "meta":
        faults.holds(arr(cond).astype(np.bool_, copy=False), "_assert_async", msg)


_SORTS = {aten.sort.default, aten.sort.stable}
_RANGE_CHECKED = {aten.index.Tensor: _index_ranges, aten.gather.default: _gather_range,
                  aten._assert_async.msg: _asserted, aten._assert_async.default: _asserted}


_DIVISION_OPS = {getattr(getattr(aten, name), overload)
                 for name in ("div", "div_") for overload in ("Tensor_mode", "Scalar_mode")} | \
    {getattr(getattr(aten, name), overload) for name in ("remainder", "remainder_", "fmod", "fmod_")
     for overload in ("Tensor", "Scalar")} | \
    {aten.floor_divide.default, aten.floor_divide.Scalar, aten.floor_divide_.Tensor, aten.floor_divide_.Scalar,
     aten.remainder.Scalar_Tensor}


def _division(func, args, kwargs):
    """torch's integer division and remainder with the spec's answers where torch has none
    (NUMERICS.md §13-14): a zero divisor is a DivisionFault (torch raises on the CPU and returns
    garbage on CUDA), INT_MIN / -1 wraps to INT_MIN and its remainder is 0 (torch's CPU
    truncating division dies of SIGFPE there). The divisor torch sees is never 0 or -1; past a
    fault that is noted (repops.faults.noted), x / 0 = x % 0 = 0 as the kernels say."""
    a, b, *rest = args
    dtype = torch.result_type(a, b)
    if dtype not in (torch.int64, torch.int32):
        return func(*args, **kwargs)
    device = next((t.device for t in (a, b) if isinstance(t, torch.Tensor)), torch.device("cpu"))  # (two Python ints)
    if device.type == "meta":
        return func(*args, **kwargs)
    ta, tb = (t if isinstance(t, torch.Tensor) else torch.tensor(t, dtype=dtype, device=device) for t in (a, b))
    tb = tb.to(dtype)
    faults.divisor_nonzero(arr(tb), DT[dtype], str(func), kernels=False)
    minus, zero = tb == -1, tb == 0  # (a zero divisor reaches here only past a noted fault: x / 0 = 0)
    name = func._schema.name.split("::")[1].rstrip("_")
    out = _TENSOR_FORM[name](ta, torch.where(minus | zero, torch.ones_like(tb), tb), *rest, **kwargs)
    if name in ("div", "floor_divide"):
        out = torch.where(minus, torch.neg(ta.to(dtype)), out)  # x / -1 = -x, wrapping at INT_MIN
    else:
        out = torch.where(minus, torch.zeros_like(out), out)
    out = torch.where(zero, torch.zeros_like(out), out)
    if func._schema.name.endswith("_"):
        return args[0].copy_(out)
    return out


_TENSOR_FORM = {"div": aten.div.Tensor_mode, "floor_divide": aten.floor_divide.default, "remainder": aten.remainder.Tensor,
                "fmod": aten.fmod.Tensor}
