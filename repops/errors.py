"""Errors RepOps raises instead of computing something non-reproducible."""


class RepOpsError(RuntimeError):
    pass


class UnsupportedOpError(RepOpsError):
    """An operation RepOps has no reproducible kernel for (never silently falls back)."""


class DTypeError(RepOpsError):
    """RepOps v1 computes in binary32 only. (Not a TypeError: Python's operator protocol
    would swallow it and retry the reflected operator.)"""


class BackendError(RepOpsError):
    """A compiled backend could not be built or loaded."""


class DeviceError(RepOpsError):
    """Inputs on several devices, or on one RepOps has no backend for."""


class DistributedError(RepOpsError):
    """A data-parallel run that cannot give the single-process bits: ranks that disagree on
    the job or the build, a world size that does not divide the micro-batches, a rank lost."""
