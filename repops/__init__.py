"""RepOps: operators that give the same bits on every CPU and GPU (docs/NUMERICS.md).
The mode (and torch with it) loads on first use: `import repops.errors` stays cheap for the
command line."""
from .errors import (BackendError, DeviceError, DistributedError, DivisionFault, DomainFault, DTypeError, Fault, IndexFault,
                     RepOpsError, UnsupportedOpError)

__all__ = ["BackendError", "DeviceError", "DistributedError", "DivisionFault", "DomainFault", "DTypeError", "Fault", "IndexFault", "RepOpsError", "RepOpsMode", "UnsupportedOpError", "deterministic",
           "dropout_key"]


def __getattr__(name):
    if name in ("RepOpsMode", "deterministic"):
        from . import mode
        return getattr(mode, name)
    if name == "dropout_key":
        from .random import dropout_key
        return dropout_key
    raise AttributeError(f"module 'repops' has no attribute {name!r}")
