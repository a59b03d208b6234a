"""Checkpoints on disk: a crash never leaves a corrupt one (write to a temporary file,
fsync, rename) and a restart finds the latest complete one."""
from __future__ import annotations

import json
import os
from pathlib import Path

from safetensors.torch import load_file, save_file


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
    """dir/ckpt-<step>.safetensors (the state after that many steps) and dir/claims.json
    (every step claim known so far, hex)."""

    def __init__(self, directory):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob("*.tmp*"):  # a crash mid-write: never a checkpoint
            stale.unlink()

    def _ckpt(self, step: int) -> Path:
        return self.dir / f"ckpt-{step:08d}.safetensors"

    def save(self, step: int, tensors: dict) -> None:
        _atomic(self._ckpt(step), lambda p: save_file(tensors, str(p), metadata={"step": str(step)}))

    def load(self, step: int) -> dict:
        return load_file(str(self._ckpt(step)))

    def steps(self) -> list[int]:
        return sorted(int(p.stem.split("-")[1]) for p in self.dir.glob("ckpt-*.safetensors"))

    def nearest(self, step: int) -> int | None:
        below = [s for s in self.steps() if s <= step]
        return below[-1] if below else None

    def claims(self) -> dict[int, bytes]:
        p = self.dir / "claims.json"
        if not p.exists():
            return {}
        return {int(k): bytes.fromhex(v) for k, v in json.loads(p.read_text()).items()}

    def save_claims(self, claims: dict[int, bytes]) -> None:
        text = json.dumps({str(k): v.hex() for k, v in sorted(claims.items())}, indent=0)
        _atomic(self.dir / "claims.json", lambda p: p.write_text(text))
