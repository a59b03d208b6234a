"""Step claims (docs/PROTOCOL.md §6): what level 1 bisects.

C_0 = H(0x06 || S_0 || ZERO)  (agreed: computed from the job)
C_p = H(0x06 || S_p || R_p)   for p = 1..T: state root after step p-1 and the trace root of
                              step p-1 (the step that made it)
A run whose step s faults (docs/NUMERICS.md §14) has no state after it: from p = s + 1 on,
every claim is the fault claim

F   = H(0x06 || H(0x0A || u32 s) || R^f)   R^f: the trace of step s up to its faulting node

so a fault opens like any claim, into a "state root" that names the step and a trace root.
The result a trainer posts is C_T (or F), sealed by commit-reveal: first
H(0x07 || job id || trainer id || C_T || salt), then C_T and salt.
"""
from __future__ import annotations

from .encoding import u32
from .merkle import ZERO, sha256

CLAIM, SEAL, FAULT = b"\x06", b"\x07", b"\x0a"


def step_claim(state_root: bytes, trace_root: bytes = ZERO) -> bytes:
    return sha256(CLAIM, state_root, trace_root)


def fault_state(step: int) -> bytes:
    """What a fault claim opens to in place of a state root: the step that faulted."""
    return sha256(FAULT, u32(step))


def fault_claim(step: int, trace_root: bytes) -> bytes:
    return step_claim(fault_state(step), trace_root)


def seal(job_id: bytes, trainer: str | bytes, claim: bytes, salt: bytes) -> bytes:
    """trainer: its 20-byte address on chain (bytes, or a 0x-prefixed hex string), its
    name (UTF-8) off chain."""
    if isinstance(trainer, str) and trainer.startswith("0x") and len(trainer) == 42:
        trainer = bytes.fromhex(trainer[2:])
    return sha256(SEAL, job_id, trainer if isinstance(trainer, bytes) else trainer.encode(), claim, salt)
