"""torch's own argument checks for a RepOps definition: the op run once on meta tensors (shapes
only, no data) before the definition computes. RepOps intercepts an aten op before torch's
kernel, so a check that lives in that kernel (transposed convolution's output_padding, a
target's shape) would otherwise be skipped and a result computed where torch raises."""
from __future__ import annotations

import functools
import math

import torch
from torch.utils._pytree import tree_map

from .errors import RepOpsError, UnsupportedOpError


def _meta(x):
    return x.to("meta") if isinstance(x, torch.Tensor) else x


class _NoKey(Exception):
    pass


def _key(x):
    """What a meta run can depend on: a tensor's dtype, shape, strides and offset (never its
    values), other arguments by type and value (a float's sign too: -0.0 == 0.0)."""
    if isinstance(x, torch.Tensor):
        return ("T", x.dtype, x.layout, tuple(x.shape), x.stride(), x.storage_offset())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, *map(_key, x))
    if isinstance(x, dict):
        return ("D", *((k, _key(v)) for k, v in sorted(x.items())))
    if isinstance(x, float):
        return (float, x, math.copysign(1.0, x))
    if x is None or isinstance(x, (bool, int, str, torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return (type(x), x)
    raise _NoKey


_PASSED: set = set()  # the argument layouts torch accepted, per op: a step repeats them every time
_PASSED_MAX = 4096


def check(func, args, kwargs=None) -> None:
    """Raise UnsupportedOpError with torch's message where torch rejects the arguments (an op
    with no meta kernel: the definition's own checks stand). An accepted layout is remembered:
    torch's meta functions are Python decompositions (nll_loss's: 2 ms of a 7 ms MLP step)."""
    try:
        key = (func, _key(args), _key(kwargs or {}))
    except _NoKey:
        key = None
    if key is not None and key in _PASSED:
        return
    try:
        func(*tree_map(_meta, tuple(args)), **tree_map(_meta, dict(kwargs or {})))
    except NotImplementedError:
        return
    except RepOpsError:
        raise
    except Exception as e:  # noqa: BLE001 - torch's own rejection, whatever its type
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise UnsupportedOpError(f"{func}: torch rejects these arguments ({type(e).__name__}: {first}); so does "
                                 "RepOps") from None
    if key is not None:
        if len(_PASSED) >= _PASSED_MAX:
            _PASSED.clear()
        _PASSED.add(key)


def checked(func):
    """A definition of `func` that first runs check()."""
    def deco(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            check(func, args, kwargs)
            return fn(*args, **kwargs)
        return run
    return deco
