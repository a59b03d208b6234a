"""What an agent must not forget across a crash: the salt of each sealed result (without
it the result cannot be revealed and the stake is lost), and which job it chose. Everything else is read back from
the chain (its seat) and from the trainer's checkpoints. SQLite, one row per job, written
and committed BEFORE the transaction that depends on it."""
from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

from ..chain.errors import ChainError


class WorkdirInUse(ChainError):
    """Another agent holds this workdir: two agents sharing one would overwrite each other's salt."""


class AgentState:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(path.parent / "agent.lock", "a+")  # one agent per workdir, released when it exits
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.seek(0)
            holder = self._lock.read().strip() or "another process"
            self._lock.close()
            raise WorkdirInUse(f"the workdir {path.parent} is in use by another agent ({holder}); two agents in "
                               "one workdir could overwrite the salt of a sealed result and lose its stake",
                               "give each agent its own --workdir (stop the other agent first to take over its "
                               "workdir)") from None
        self._lock.truncate(0)
        self._lock.write(f"pid {os.getpid()}")
        self._lock.flush()
        self.db = sqlite3.connect(path, isolation_level=None)  # autocommit: each write is durable at once
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS sealed (job INTEGER PRIMARY KEY, claim BLOB NOT NULL, "
                        "salt BLOB NOT NULL)")
        # the job id an agent found for its job file (no id given): kept, so a restart plays the same job
        self.db.execute("CREATE TABLE IF NOT EXISTS chosen (spec BLOB PRIMARY KEY, job INTEGER NOT NULL)")

    def sealed(self, job: int) -> tuple[bytes, bytes] | None:
        row = self.db.execute("SELECT claim, salt FROM sealed WHERE job = ?", (job,)).fetchone()
        return (bytes(row[0]), bytes(row[1])) if row else None

    def seal(self, job: int, claim: bytes, salt: bytes):
        self.db.execute("INSERT OR REPLACE INTO sealed (job, claim, salt) VALUES (?, ?, ?)", (job, claim, salt))

    def chosen(self, spec: bytes) -> int | None:
        row = self.db.execute("SELECT job FROM chosen WHERE spec = ?", (spec,)).fetchone()
        return row[0] if row else None

    def choose(self, spec: bytes, job: int):
        self.db.execute("INSERT OR REPLACE INTO chosen (spec, job) VALUES (?, ?)", (spec, job))

    def close(self):
        self.db.close()
        self._lock.close()
