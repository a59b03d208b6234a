"""Checkpoints on disk: a crash never leaves a corrupt one (write to a temporary file,
fsync, rename) and a restart finds the latest complete one."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

log = logging.getLogger("verde.trainer")


def _atomic(path: Path, write) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    write(tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class CheckpointStore:
    """dir/ckpt-<step>.safetensors (the state after that many steps), dir/claims.json
    (every step claim known so far, hex) and dir/fault.json (the step the run faulted at)."""

    def __init__(self, directory, clean: bool = True):
        """clean: remove what a crash mid-write left (not by a second reader of a store
        another process is writing)."""
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob("*.tmp*") if clean else ():  # a crash mid-write: never a checkpoint
            stale.unlink(missing_ok=True)

    def _ckpt(self, step: int) -> Path:
        return self.dir / f"ckpt-{step:08d}.safetensors"

    def save(self, step: int, tensors: dict) -> None:
        _atomic(self._ckpt(step), lambda p: save_file(tensors, str(p), metadata={"step": str(step)}))

    def load(self, step: int) -> dict:
        return load_file(str(self._ckpt(step)))

    def steps(self) -> list[int]:
        return sorted(int(p.stem.split("-")[1]) for p in self.dir.glob("ckpt-*.safetensors"))

    def load_nearest(self, step: int) -> tuple[int, dict | None]:
        """The latest readable checkpoint at or before `step`: (its step, its tensors), or
        (0, None). One that cannot be read (truncated, damaged on disk) is moved aside to
        *.corrupt, said, and the one before it is used: checkpoints are deterministic, so
        re-running from an earlier one loses nothing but time."""
        for s in reversed([s for s in self.steps() if s <= step]):
            try:
                return s, self.load(s)
            except (SafetensorError, OSError) as e:
                bad = self._ckpt(s)
                bad.replace(bad.with_name(bad.name + ".corrupt"))
                log.warning("checkpoint %s cannot be read (%s); moved aside to %s.corrupt, resuming from an "
                            "earlier one", bad, e, bad.name)
        return 0, None

    def claims(self) -> dict[int, bytes]:
        p = self.dir / "claims.json"
        if not p.exists():
            return {}
        return {int(k): bytes.fromhex(v) for k, v in json.loads(p.read_text()).items()}

    def fault(self) -> tuple[int, str] | tuple[None, None]:
        """(the step at which the run faulted, what the fault said) from fault.json, or Nones."""
        p = self.dir / "fault.json"
        if not p.exists():
            return None, None
        f = json.loads(p.read_text())
        return f["step"], f.get("message", "")

    def save_fault(self, step: int, message: str) -> None:
        _atomic(self.dir / "fault.json", lambda p: p.write_text(json.dumps({"step": step, "message": message})))

    def save_claims(self, claims: dict[int, bytes]) -> None:
        text = json.dumps({str(k): v.hex() for k, v in sorted(claims.items())}, indent=0)
        _atomic(self.dir / "claims.json", lambda p: p.write_text(text))
