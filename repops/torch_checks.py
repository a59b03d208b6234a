"""torch's own argument checks for a RepOps definition: the op run once on meta tensors (shapes
only, no data) before the definition computes. RepOps intercepts an aten op before torch's
kernel, so a check that lives in that kernel (transposed convolution's output_padding, a
target's shape) would otherwise be skipped and a result computed where torch raises."""
from __future__ import annotations

import functools

import torch
from torch.utils._pytree import tree_map

from .errors import RepOpsError, UnsupportedOpError


def _meta(x):
    return x.to("meta") if isinstance(x, torch.Tensor) else x


def check(func, args, kwargs=None) -> None:
    """Raise UnsupportedOpError with torch's message where torch rejects the arguments (an op
    with no meta kernel: the definition's own checks stand)."""
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


def checked(func):
    """A definition of `func` that first runs check()."""
    def deco(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            check(func, args, kwargs)
            return fn(*args, **kwargs)
        return run
    return deco
