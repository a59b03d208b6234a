"""Faults (docs/NUMERICS.md §14): the inputs the spec defines no result for, each a rule that
kernels a referee can re-execute decide. The rule's check is a bool tensor `bad` computed by
the integer kernels, then the kernel `fault.bool` (a copy of `bad`); the step faults at the
first true element (row-major) of the first `fault.bool` kernel that has one. torch raises on
these inputs too; RepOps raises a Fault that names the rule and the element, and a Verde job
ends with a fault claim that points at exactly that kernel and element (docs/PROTOCOL.md §6).

Where a decomposition observes the kernels (prims.observe: a dispute, the referee) the check
IS those kernels; elsewhere (training, on any backend or device) it is the same comparisons
done directly, on the array's own device. tests/repops/test_faults.py holds the two to each
other.

On a device (CuPy arrays) reading a check's flags on the host waits for the device: a sync
per check. Inside `deferred()` (repops.deterministic() enters it unless a trace records
each op's inputs) the flags stay on the device and are read together, once, when the block
ends (settle): the same error for the first failing check, raised at the end of the block
instead of at its op (the ops after it ran on, each gather reading its fill). The rules a
training step checks, index and (in embedding backward) finite, are the CUDA backend's own
kernels there (index_flags, finite_flags: a launch writing the first bad element into the
block's slots, no CuPy kernel and no flag array, so a CUDA graph can hold the step)."""
from __future__ import annotations

import contextlib
import functools
import contextvars

import numpy as np

from .errors import DivisionFault, DomainFault, Fault, IndexFault
from .reference import integers as I
from .reference import prims as P

_NOTE: contextvars.ContextVar = contextvars.ContextVar("repops_fault_note", default=None)
_PENDING: contextvars.ContextVar = contextvars.ContextVar("repops_fault_pending", default=None)
_CAPTURED: contextvars.ContextVar = contextvars.ContextVar("repops_fault_captured", default=None)


@contextlib.contextmanager
def noted(callback):
    """Inside, a fault does not raise: callback(rule, element) is called for each `fault`
    kernel with a true element, and the op computes on (every kernel has a value for every
    input: gather reads its fill, x / 0 = 0). What a decomposition needs: the whole kernel
    sequence, whose structure never depends on values, and where it first faults."""
    token = _NOTE.set(callback)
    try:
        yield
    finally:
        _NOTE.reset(token)


@contextlib.contextmanager
def deferred(on: bool = True):
    """Inside, a check of device arrays queues its flags (on the device) instead of reading
    them; they are read once when the block ends, and the first failing check raises as it
    would have at its op. An error in the block settles first: a fault behind it is raised
    instead (it caused what followed). on=False: checks stay immediate."""
    if not on:
        yield
        return
    token = _PENDING.set([])
    try:
        yield
    except Exception as e:
        if _CAPTURED.get() is None:  # (captured, nothing ran: there is nothing to read)
            try:
                settle()
            except Fault as fault:
                raise fault from e
        raise
    else:
        kept = _CAPTURED.get()
        if kept is None:
            settle()
        else:
            _keep(kept)
    finally:
        _PENDING.reset(token)


@contextlib.contextmanager
def captured():
    """Inside, a CUDA graph is being captured: no kernel has run and a read would break the
    capture, so a block's queued checks are kept, not read, when it ends. Yields the list
    they go to; replayed(it) reads them after each replay of the graph."""
    kept: list = []
    token = _CAPTURED.set(kept)
    try:
        yield kept
    finally:
        _CAPTURED.reset(token)


def state() -> tuple:
    """This block's queue of checks and its capture (deferred, captured), to be carried by
    in_state() to a thread that does not have them: autograd runs a CUDA tensor's backward on
    its own device thread, where these context variables are unset, so a check there read its
    flags at once: a host sync per step, and a capture broken by its download."""
    return _PENDING.get(), _CAPTURED.get()


@contextlib.contextmanager
def in_state(saved: tuple | None):
    """Inside, the checks go where state() said (None, or where they already do: nothing to set)."""
    if saved is None or (_PENDING.get() is saved[0] and _CAPTURED.get() is saved[1]):
        yield
        return
    pending, captured = saved
    tokens = _PENDING.set(pending), _CAPTURED.set(captured)
    try:
        yield
    finally:
        _CAPTURED.reset(tokens[1])
        _PENDING.reset(tokens[0])


def _keep(kept: list) -> None:
    pending = _PENDING.get()
    for flags, *_ in pending:
        if not hasattr(flags, "keep"):  # (a flag array: CuPy's kernels and memory, which a graph cannot hold)
            from .errors import BackendError
            raise BackendError("a check in this step is not a backend's own kernel (its flags are CuPy arrays): "
                               "the step cannot be captured as a CUDA graph; it runs eagerly")
    for flags, *_ in pending:
        flags.keep()
    kept.extend(pending)
    pending[:] = []


def replayed(kept: list) -> None:
    """After a replay of a captured graph: its checks' slots read again (one download) and
    the first fault raised, as settle() does when an eager block ends."""
    for flags, *_ in kept:
        flags.reread()
    _settle(list(kept))


def settle() -> None:
    """Read the queued checks' flags (one device->host read) and raise the first fault."""
    pending = _PENDING.get()
    if not pending:
        return
    checks, pending[:] = list(pending), []
    _settle(checks)


def _settle(checks: list) -> None:
    if not checks:
        return
    # a backend's own checks (first(): their slots, a download a block) and flag arrays (reduced
    # where they live, one read); the backends' checks first, whose read usually settles all
    hit, arrays = False, []
    for f, *_ in checks:
        if not hasattr(f, "first"):
            arrays.append(f)
        elif not hit and f.first() is not None:
            hit = True
    if not hit and arrays:
        from .cuda.device import stream_for
        xp = P.xp_of(arrays[0])
        with stream_for(xp):  # (the stream the checks ran on)
            hit = bool(functools.reduce(xp.logical_or, [f.any() for f in arrays]))  # (no stacking copy)
    if not hit:
        return
    for check in checks:  # a fault: each check read again, in order (the first one raises)
        _check(*check, defer=False)


def first(flags) -> int | None:
    """The first true element of a bool array (numpy or device), or None; a backend's own
    check (index_flags on the CUDA backend: repops.cuda.ops.DeviceCheck) knows it."""
    if hasattr(flags, "first"):
        return flags.first()
    if not flags.size:
        return None
    if P.xp_of(flags) is np:
        hit = np.flatnonzero(np.asarray(flags).reshape(-1))
        return int(hit[0]) if hit.size else None
    return int(flags.reshape(-1).argmax()) if bool(flags.any()) else None


def _check(flags, rule: str, exc, describe, defer: bool = True):
    note, pending = _NOTE.get(), _PENDING.get()
    if defer and pending is not None and note is None and (hasattr(flags, "first") or P.xp_of(flags) is not np):
        pending.append((flags, rule, exc, describe))  # read with the others when the block ends
        return
    e = first(flags)
    if e is None:
        return
    if note is not None:
        note(rule, e)
        return
    raise exc(describe(e), rule, e)


def index_in_range(i, n: int, op: str, ignore: int | None = None, given=None, kernels: bool | None = None) -> None:
    """Rule `index`: every element of the int64 index array i lies in [0, n), or equals
    `ignore` (nll_loss's ignore_index, which may be a class). Kernels:
    bad = or(lt(i, 0), le(n, i)) [and(bad, not(eq(i, ignore)))], then fault(bad).
    given: the index as the user gave it, when i is its wrap (wrap_negative): the message
    quotes it and torch's range [-n, n). kernels False: the direct check even when observed
    (before torch's own kernel, which a decomposition never is)."""
    if P.observing() if kernels is None else kernels:
        K = I.KERNELS
        bad = K["or.bool"](K["lt.i64"](i, I.const(0, "i64")), K["le.i64"](I.const(n, "i64"), i))
        if ignore is not None:
            bad = K["and.bool"](bad, K["not.bool"](K["eq.i64"](i, I.const(ignore, "i64"))))
        flags = K["fault.bool"](bad)
    else:  # the same comparisons, where the array lives (or the backend's own check)
        flags = index_flags(i, n, ignore)

    def describe(e):
        v = int((i if given is None else given).reshape(-1)[e])
        return (f"{op}: index {v} (element {e} of the index tensor) is outside [{0 if given is None else -n}, {n})" +
                ("" if ignore is None else f" and is not ignore_index {ignore}"))
    _check(flags, "index", IndexFault, describe)


@P.overridable("index_check")
def index_flags(i, n: int, ignore: int | None):
    """Rule `index`'s flags, where the int64 array i lives: true where an element is outside
    [0, n) and is not `ignore`. A backend may return its own check instead, read by first()
    (the CUDA backend's: one kernel, no flag array, read when the block settles)."""
    flags = (i < 0) | (i >= n)
    if ignore is not None:
        flags &= i != ignore
    return flags


def wrap_negative(i, n: int):
    """torch's negative indices (advanced indexing, index_put): i + n where i < 0, as the
    kernels select.i64(lt.i64(i, 0), add.i64(i, n), i); an index outside [-n, n) stays
    outside [0, n), so index_in_range on the result is torch's check. On a device array
    (no decomposition observes there) the same arithmetic where the array lives."""
    if P.xp_of(i) is not np:
        return P.xp_of(i).where(i < 0, i + n, i)
    K = I.KERNELS
    return K["select.i64"](K["lt.i64"](i, I.const(0, "i64")), K["add.i64"](i, I.const(n, "i64")), i)


def divisor_nonzero(b, dt: str, op: str, kernels: bool | None = None) -> None:
    """Rule `division`: no element of the divisor (an operand of dtype dt: i64, i32) is 0.
    Kernels: fault(eq(b, 0)). kernels False: the direct check even when observed (torch's own
    division, which a decomposition never is)."""
    if P.observing() if kernels is None else kernels:
        flags = I.KERNELS["fault.bool"](I.KERNELS[f"eq.{dt}"](b, I.const(0, dt)))
    else:
        flags = b == 0
    _check(flags, "division", DivisionFault,
           lambda e: f"{op}: integer division by zero (element {e} of the divisor)")


def _holds(ok, rule: str, exc, describe) -> None:
    """The one shape of a rule whose condition is a bool array ok (kernels when observed):
    the step faults at ok's first false element. Kernels: fault(not(ok))."""
    _check(I.KERNELS["fault.bool"](I.KERNELS["not.bool"](ok)) if P.observing() else ~ok, rule, exc, describe)


def in_unit_interval(p, op: str) -> None:
    """Rule `domain`: every element of the binary32 array p lies in [0, 1] (torch refuses
    anything else, NaN included). Kernels: fault(not(and(le(0, p), le(p, 1))))."""
    if P.observing():
        zero, one = P.const(0.0, p.shape), P.const(1.0, p.shape)
        ok = I.KERNELS["and.bool"](P.le(zero, p), P.le(p, one))
    else:
        ok = (p >= 0) & (p <= 1)
    _holds(ok, "domain", DomainFault,
           lambda e: f"{op}: element {e} of the input is {float(p.reshape(-1)[e])!r}, not a probability in [0, 1] "
                     "(apply sigmoid first, or use binary_cross_entropy_with_logits on the logits)")


def not_nan(x, op: str, why: str) -> None:
    """Rule `domain`: no element of the binary32 array x is NaN, where the op's result would
    depend on a NaN's bits (its sign, signaling or quiet) and the primitives' NaNs are all the
    canonical one. Kernels: fault(not(eq(x, x)))."""
    _holds(P.eq(x, x) if P.observing() else x == x, "domain", DomainFault,
           lambda e: f"{op}: element {e} is NaN, {why}")


def holds(ok, op: str, why: str) -> None:
    """Rule `domain`: the bool array ok is true everywhere (a value check a definition or a
    program makes: torch's runtime asserts, RepOps' checks in composites). A claim like any
    fault, never an error that stops an honest trainer."""
    _holds(ok, "domain", DomainFault, lambda e: f"{op}: {why}")


def finite(x, op: str, why: str) -> None:
    """Rule `domain`: every element of the binary32 array x is finite, where the spec's result
    for a non-finite one would not be torch's (a one-hot accumulation: 0 · inf is NaN in every
    other row). Kernels: fault(not(lt(abs(x), +inf)))."""
    def describe(e):
        return f"{op}: element {e} is not finite, {why}"
    if P.observing():
        _holds(P.lt(P.abs_(x), np.float32(np.inf)), "domain", DomainFault, describe)
    else:
        _check(finite_flags(x), "domain", DomainFault, describe)


@P.overridable("finite_check")
def finite_flags(x):
    """Rule `domain`'s flags for finite(), where the binary32 array x lives: true where an
    element is not finite. A backend may return its own check instead, read by first() (the
    CUDA backend's: one kernel, no flag array, read when the block settles; a CUDA graph can
    hold it, as it holds index_flags')."""
    return ~(abs(x) < np.float32(np.inf))


def offsets_ordered(o, n: int, op: str) -> None:
    """Rule `offsets`: the int64 group ends o (torch._grouped_mm's offs) are non-decreasing and
    within [0, n] (torch checks neither: it reads past its rows or leaves them unwritten).
    Kernels: bad = or(lt(o, 0), le(n + 1, o), lt(o, o shifted right by one, 0 first)), then
    fault(bad)."""
    if P.observing():
        K, zero = I.KERNELS, I.const(0, "i64")
        before = P.place(o.shape, 0, [(1, 1, o[:-1])], np.int64(0), K["copy.i64"])
        bad = K["or.bool"](K["or.bool"](K["lt.i64"](o, zero), K["le.i64"](I.const(n + 1, "i64"), o)),
                           K["lt.i64"](o, before))
        flags = K["fault.bool"](bad)
    else:
        flags = (o < 0) | (o > n)
        flags[1:] |= o[1:] < o[:-1]

    def describe(e):
        return (f"{op}: offset {int(o.reshape(-1)[e])} (element {e} of offs) is not a group end in order within "
                f"[0, {n}]: offs must be non-decreasing group ends (a cumsum of the group sizes)")
    _check(flags, "offsets", DomainFault, describe)


def nonsingular(info, op: str, why: str) -> None:
    """Rule `singular`: every factorisation's info (int32, LAPACK's: 0, or 1 + the first step
    whose pivot is zero / not positive) is 0: torch raises there (LinAlgError), or returns a
    partial factor whose values are LAPACK's blocked order's, which RepOps does not define.
    Kernels: fault(not(eq(info, 0)))."""
    ok = I.KERNELS["eq.i32"](info, I.const(0, "i32")) if P.observing() else info == 0
    _holds(ok, "singular", DomainFault,
           lambda e: f"{op}: matrix {e} of the batch {why} (step {int(info.reshape(-1)[e])} of its factorisation): "
                     "torch raises or returns a partial factor here")


def in_window(found, op: str) -> None:
    """Rule `index`, for pooling indices: every index names a position of its own window
    (found: a bool array, true where it does). Kernels: fault(not(found)). torch would write a
    gradient wherever such an index points; RepOps' backward reads each window only."""
    _holds(found, "index", IndexFault,
           lambda e: f"{op}: the index at element {e} is not a position of its pooling window (indices must be the "
                     "ones the forward returned)")
