"""Rounding a float64 result to float32, and the rounding log's one decision per element
(Srivastava, Arora, Boneh, "Optimistic Verifiable Training by Controlling Hardware
Nondeterminism", Algorithm 1 and `rev`), in one place for the recorder and the replayer.

For x (float64) and r = x rounded to the nearest float32, with u = the float32 spacing at r:
  code 2 (the trainer rounded up)    if |x - r| > tau*u and x < r
  code 0 (the trainer rounded down)  if |x - r| > tau*u and x > r
  code 1 (ignore: round to nearest)  otherwise.
A replayer rounds its own x' up (code 2), down (code 0) or to nearest (code 1); it gets the
trainer's float32 whenever |x' - x| < min(tau, 1/2 - tau)*u, so tau = 1/4 tolerates the most
divergence (the paper's lower bound)."""
from __future__ import annotations

import numpy as np

DOWN, IGNORE, UP = 0, 1, 2


def _spacing(r: np.ndarray) -> np.ndarray:
    """The float32 spacing at each float32 value (as float64): the paper's exponent scale."""
    return np.spacing(np.abs(r)).astype(np.float64)


def decide(x: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """float64 -> (its float32 rounding to nearest, the code of each element, uint8)."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
        d = x - r.astype(np.float64)
        far = np.abs(d) > tau * _spacing(r)  # NaN and inf compare False: ignored
    codes = np.where(far, np.where(d < 0, UP, DOWN), IGNORE).astype(np.uint8)
    return np.asarray(r, np.float32), codes


def apply(x: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """float64 -> float32, rounding each element the way its code says (`rev`)."""
    shape = np.shape(x)
    x, codes = np.asarray(x, np.float64).reshape(-1), np.asarray(codes).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
        r64 = r.astype(np.float64)
        up = (codes == UP) & (r64 < x)  # nearest went down, the trainer's went up
        down = (codes == DOWN) & (r64 > x)
    r[up] = np.nextafter(r[up], np.float32(np.inf))
    r[down] = np.nextafter(r[down], np.float32(-np.inf))
    return r.reshape(shape)
