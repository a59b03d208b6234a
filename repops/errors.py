"""Errors RepOps raises instead of computing something non-reproducible."""


class RepOpsError(RuntimeError):
    pass


class UnsupportedOpError(RepOpsError):
    """An operation RepOps has no reproducible kernel for (never silently falls back)."""


class DTypeError(RepOpsError, TypeError):
    """RepOps v1 computes in binary32 only."""


class BackendError(RepOpsError):
    """A compiled backend could not be built or loaded."""
