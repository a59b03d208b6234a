"""Progress of a loop of steps: tqdm's bar on a terminal; in a redirected log (an agent's
file, a CI job) no carriage returns, but a log line at the start, every tenth of the way and
at the end, which a file keeps readable."""
from __future__ import annotations

import logging
import sys

log = logging.getLogger("verde.trainer")


def steps(it: range, desc: str, enabled: bool = True, total: int | None = None, leave: bool = True):
    """Iterate `it` (steps start .. stop-1 of `total`), showing progress when `enabled`."""
    total = it.stop if total is None else total
    if not enabled:
        return iter(it)
    if sys.stderr.isatty():
        from tqdm import tqdm
        return iter(tqdm(it, desc=desc, initial=it.start, total=total, leave=leave))
    return _lines(it, desc, total)


def _lines(it: range, desc: str, total: int):
    every = max(1, total // 10)
    log.info("%s: step %d of %d", desc, it.start, total)
    for s in it:
        yield s
        if (s + 1) % every == 0 and s + 1 < it.stop:
            log.info("%s: step %d of %d", desc, s + 1, total)
    if len(it):
        log.info("%s: step %d of %d", desc, it.stop, total)
