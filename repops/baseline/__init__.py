"""The rounding-log baseline (Srivastava, Arora, Boneh): train in float64, round every op's
result to float32, log the rounding direction of each element near a rounding boundary, and
replay the log elsewhere to get the same float32 bits. Built to measure RepOps against it
(benchmarks/baseline_vs_repops.py); RepOps needs no log."""
from .encoding import compress, pack, unpack
from .mode import LogMismatch, RoundingLog, StepLog
from .rounding import DOWN, IGNORE, UP, apply, codes_of, decide, nearest

__all__ = ["DOWN", "IGNORE", "UP", "LogMismatch", "RoundingLog", "StepLog", "apply", "codes_of", "compress", "decide",
           "nearest", "pack", "unpack"]
