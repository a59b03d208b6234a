"""The rounding-log baseline as a dispatch mode: every float32 aten op runs natively in
float64 (torch's own kernels, in whatever order they sum) and its result is rounded to
float32, recording the rounding decisions (`record`), following a recorded log (`replay`),
or neither (`nearest`, what training without the log would do). Exact data movement runs as
it is; RepOps' fused operators run as their reference compositions, each op rounded.

`split` > 1 changes the float64 summation order the way other hardware does: matrix
products and sums over a dimension are computed in `split` slices of the reduced dimension,
added last slice first (a split-K GEMM; for a weight gradient, whose reduced dimension is the
batch, a different batch split). Such reorderings move a float64 result by about 2^-53 of its
terms, which flips a float32 rounding about once in 10^8 elements; `drift` emulates
hardware that differs more (the paper's d_div): every float64 result is scaled by
(1 + drift*u), u uniform in [-1, 1] from `seed`, before it is rounded."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch._library.custom_ops import OPDEFS
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from ..aten import EXACT
from .encoding import compress, pack
from .rounding import IGNORE, apply, codes_of, nearest

aten = torch.ops.aten
# data movement outside repops.aten.EXACT: selections and sign flips, exact in float32
MOVES = {aten.embedding.default, aten.index_select.default, aten.gather.default, aten.neg.default, aten.relu.default,
         aten.threshold_backward.default, aten.where.self, aten.abs.default, aten.masked_fill.Scalar}
SPLIT_MM = {aten.mm.default, aten.bmm.default, aten.addmm.default}
BINS = 100  # of the distances' histogram over [0, 1/2] float32 spacing


class LogMismatch(ValueError):
    """A replayed step does not run the ops its log was recorded for."""


@dataclass
class StepLog:
    """One step's decisions, in execution order: (op, codes) per rounded output."""
    entries: list = field(default_factory=list)

    def elements(self) -> int:
        return sum(c.size for _, c in self.entries)

    def logged(self) -> int:
        """Elements with a direction (0 or 2): what a replayer must follow."""
        return sum(int(np.count_nonzero(c != IGNORE)) for _, c in self.entries)

    def raw_bytes(self) -> int:
        """One byte per entry: the paper's naive encoding."""
        return self.elements()

    def packed(self) -> list[bytes]:
        """Each entry packed (five codes a byte), the unit its Merkle leaves commit to."""
        return [op.encode() + b"\0" + pack(c) for op, c in self.entries]

    def compressed_bytes(self) -> int:
        return len(compress(b"".join(self.packed())))


class RoundingLog(TorchDispatchMode):
    """mode: "record" (fills self.log), "replay" (follows `log`) or "nearest" (no log)."""

    def __init__(self, mode: str = "record", tau: float = 0.25, log: StepLog | None = None, split: int = 1,
                 drift: float = 0.0, seed: int = 0):
        super().__init__()
        if mode not in ("record", "replay", "nearest"):
            raise ValueError(f"unknown rounding-log mode {mode!r}: record, replay or nearest")
        if mode == "replay" and log is None:
            raise ValueError("replay needs the log to follow")
        if not 0 <= tau < 0.5:
            raise ValueError(f"threshold tau={tau} is outside [0, 0.5) float32 spacings")
        self.mode, self.tau, self.split, self.drift = mode, tau, split, drift
        self._rng = np.random.default_rng(seed)
        self.log = log if mode == "replay" else StepLog()
        self.next = 0  # the replayed entry
        self.distances = None  # set to np.zeros(BINS) to histogram |x - nearest| in float32 spacings
        self.corrections = 0  # replay: elements whose rounding the log changed (the paper's `rev` count)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "repops":  # a fused operator: its reference composition, op by op
            with self:
                return OPDEFS[func._schema.name]._init_fn(*args, **kwargs)
        if func in EXACT or func in MOVES or func.is_view or not _has_float32((args, kwargs)):
            return func(*args, **kwargs)
        wide_args, wide_kwargs = tree_map(_widen, (args, kwargs))
        out = self._compute(func, wide_args, wide_kwargs)
        written = [i for i, a in enumerate(func._schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
        if written:  # in place: the float64 copy was written; round it back into the float32 original
            for i in written:
                args[i].copy_(self._round(func, wide_args[i]))
            return args[written[0]]
        return tree_map(lambda t: self._round(func, t) if isinstance(t, torch.Tensor) and t.dtype == torch.float64
                        else t, out)

    def _compute(self, func, args, kwargs):
        if self.split > 1 and func in SPLIT_MM and not kwargs:
            a, b = args[-2], args[-1]
            parts = [torch.matmul(a[..., s], b[..., s, :]) for s in _slices(a.shape[-1], self.split)]
            out = _sum_reversed(parts)
            return args[0] + out if func is aten.addmm.default else out
        if self.split > 1 and func is aten.sum.dim_IntList and len(args) >= 2 and args[1] and not kwargs:
            x, dims = args[0], args[1]
            d = dims[0] % x.dim()
            keep = len(args) > 2 and args[2]
            parts = [func(x.narrow(d, s.start, s.stop - s.start), dims, True) for s in _slices(x.shape[d], self.split)]
            out = _sum_reversed(parts)
            return out if keep else out.squeeze([dd % x.dim() for dd in dims])
        return func(*args, **kwargs)

    def _round(self, func, t: torch.Tensor) -> torch.Tensor:
        x = t.detach().cpu().contiguous().numpy()
        if self.drift:
            x = np.asarray(x * (1 + self.drift * self._rng.uniform(-1, 1, x.shape)))
        name = str(func)
        if self.mode == "replay":
            if self.next >= len(self.log.entries):
                raise LogMismatch(f"{name}: the log has only {len(self.log.entries)} entries for this step")
            op, codes = self.log.entries[self.next]
            self.next += 1
            if op != name or codes.size != x.size:
                raise LogMismatch(f"entry {self.next - 1}: the log recorded {op} ({codes.size} elements), this step "
                                  f"runs {name} ({x.size})")
            r, corrected = apply(x, codes.reshape(x.shape))
            self.corrections += corrected
        else:
            r, distance = nearest(x)
            codes = codes_of(distance, self.tau)
            if self.distances is not None:
                d = np.abs(distance)
                self.distances += np.histogram(d[np.isfinite(d)], BINS, (0.0, 0.5))[0]
            if self.mode == "record":
                self.log.entries.append((name, codes.ravel()))
        return torch.from_numpy(np.asarray(r, np.float32).reshape(x.shape)).to(t.device)

    def finished(self):
        """After a replayed step: every entry of its log was used."""
        if self.mode == "replay" and self.next != len(self.log.entries):
            raise LogMismatch(f"the step used {self.next} of its log's {len(self.log.entries)} entries")


def _has_float32(tree) -> bool:
    return any(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in tree_leaves(tree))


def _widen(x):
    if isinstance(x, torch.Tensor) and x.dtype == torch.float32:
        return x.double()
    return torch.float64 if x is torch.float32 else x


def _slices(n: int, k: int) -> list[slice]:
    edges = np.linspace(0, n, min(k, n) + 1).astype(int)
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _sum_reversed(parts):
    out = parts[-1]
    for p in reversed(parts[:-1]):
        out = out + p
    return out
