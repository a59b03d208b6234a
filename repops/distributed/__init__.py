"""Data-parallel training with the single-process bits for any world size dividing the
job's micro-batch count (docs/NUMERICS.md §11): the fixed reduction tree, the micro-batch
step, and DataParallel for one's own torchrun loop."""
from ..errors import DistributedError
from .data_parallel import DataParallel, build_id, init
from .micro import single_process_step
from .tree import TreeSum, block, check_world, cover, split

__all__ = ["DataParallel", "DistributedError", "TreeSum", "block", "build_id", "check_world", "cover", "init",
           "single_process_step", "split"]
