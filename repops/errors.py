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


class Fault(RepOpsError):
    """An input the spec defines no result for (docs/NUMERICS.md §14): torch raises on it too.
    Not a refusal: every honest party on every device meets the same fault at the same element,
    so in a Verde job it ends the run with a fault claim (docs/PROTOCOL.md §6). `rule` names the
    check, `element` the first offending element (row-major) of the checked tensor."""

    def __init__(self, message: str, rule: str = "", element: int | None = None):
        super().__init__(message)
        self.rule, self.element = rule, element


class IndexFault(Fault, IndexError):
    """An index outside its range (torch: IndexError)."""


class DivisionFault(Fault, ZeroDivisionError):
    """An integer division or remainder by zero (torch: RuntimeError 'ZeroDivisionError')."""


class DomainFault(Fault, ValueError):
    """A value outside the domain torch checks (binary_cross_entropy's probability outside [0, 1])."""
