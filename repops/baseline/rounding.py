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


def nearest(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 -> (its float32 rounding to nearest, the signed distance x - nearest in float32
    spacings at it: the paper's exponent scale; NaN where x or the rounding is not finite)."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.asarray(x.astype(np.float32), np.float32)
        return r, (x - r.astype(np.float64)) / np.spacing(np.abs(r)).astype(np.float64)


def codes_of(distance: np.ndarray, tau: float) -> np.ndarray:
    """The code of each element from its distance (`nearest`): NaN compares False, ignored."""
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(distance) > tau, np.where(distance < 0, UP, DOWN), IGNORE).astype(np.uint8)


def decide(x: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """float64 -> (its float32 rounding to nearest, the code of each element, uint8)."""
    r, distance = nearest(x)
    return r, codes_of(distance, tau)


def apply(x: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, int]:
    """float64 -> (float32 rounded the way each element's code says (`rev`), how many of
    them that moved off the nearest)."""
    shape = np.shape(x)
    x, codes = np.asarray(x, np.float64).reshape(-1), np.asarray(codes).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
        r64 = r.astype(np.float64)
        up = (codes == UP) & (r64 < x)  # nearest went down, the trainer's went up
        down = (codes == DOWN) & (r64 > x)
    r[up] = np.nextafter(r[up], np.float32(np.inf))
    r[down] = np.nextafter(r[down], np.float32(-np.inf))
    return r.reshape(shape), int(np.count_nonzero(up) + np.count_nonzero(down))
