"""Dropout's keep mask on the CPU backend (kernels/random.c over repops/kernels/philox.h),
equal to repops.reference.prims.philox bit for bit."""
from __future__ import annotations

import numpy as np

from ..reference import prims as P
from .build import default_threads, lib


def uniform_words(operands):
    """Each operand's one value as an unsigned word, or None when one varies (the spec's
    general broadcast then runs: RepOps' dropout always passes single values)."""
    words = []
    for a in operands:
        a = np.asarray(a)
        if a.size == 0 or (a.size > 1 and any(a.strides)):
            return None
        words.append(int(a.reshape(-1)[0] if a.size == 1 else a.flat[0]) & 0xFFFFFFFF)
    return words


def philox(step, seed, stream, threshold):
    shape = np.broadcast_shapes(*(np.shape(a) for a in (step, seed, stream, threshold)))
    words = uniform_words((step, seed, stream, threshold))
    if words is None:
        return P.philox.reference(step, seed, stream, threshold)
    out = np.empty(shape, np.bool_)
    if out.size:
        lib().repops_philox_keep(*words, out.ctypes.data, out.size, default_threads())
    return out


TABLE = {"philox": philox}
