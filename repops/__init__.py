"""RepOps: operators that give the same bits on every CPU and GPU (docs/NUMERICS.md)."""
from .errors import BackendError, DeviceError, DTypeError, RepOpsError, UnsupportedOpError
from .mode import RepOpsMode, deterministic

__all__ = ["BackendError", "DeviceError", "DTypeError", "RepOpsError", "RepOpsMode", "UnsupportedOpError", "deterministic"]
