"""Dropout's keep mask on the CPU backend (kernels/random.c over repops/kernels/philox.h),
equal to repops.reference.prims.philox bit for bit."""
from __future__ import annotations

import numpy as np

from ..reference import prims as P
from .build import default_threads, lib


def philox(step, seed, stream, threshold):
    """Single-value operands (what dropout passes) as four words; else the spec's broadcast."""
    words = P.single_words((step, seed, stream, threshold))
    if words is None:
        return P.philox.reference(step, seed, stream, threshold)
    out = np.empty(np.broadcast_shapes(*(np.shape(a) for a in (step, seed, stream, threshold))), np.bool_)
    if out.size:
        lib().repops_philox_keep(*words, out.ctypes.data, out.size, default_threads())
    return out


TABLE = {"philox": philox}
