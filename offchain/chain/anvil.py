"""Run Anvil (from node_modules) as a child process we own: free loopback port, no steps
tracing, bounded start-up wait, and no orphan whatever way the parent ends."""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from .errors import ChainUnavailable, ToolchainError

ROOT = Path(__file__).resolve().parents[2]
ANVIL_BIN = ROOT / "node_modules" / "@foundry-rs" / "anvil-linux-amd64" / "bin" / "anvil"
MNEMONIC = "test test test test test test test test test test test junk"
CHAIN_ID = 31337
GAS_LIMIT = 60_000_000
START_TIMEOUT_S = 20.0
# Past its in-memory history (the last ~500 blocks' states) Anvil writes each state to disk
# under ~/.foundry/anvil/tmp and leaves them there when stopped by a signal: test_game_steps'
# shared node alone wrote 3.6 GB in one run; 74 GB from 20 hours of test runs filled this
# machine's disk and the next CI run failed on it. Nothing here reads a state that old (agents
# read the latest block), so none goes to disk.
KEEP_NO_OLD_STATES = ("--max-persisted-states", "0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def die_with_parent():
    """preexec_fn for subprocess.Popen (issue #22): the kernel stops the child when its parent
    dies, even by SIGKILL, so no node, agent or trainer process outlives the command that
    started it. SAFETY: runs in the child between fork and exec; PR_SET_PDEATHSIG (1) makes the
    kernel send it SIGTERM then."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def rpc(url: str, method: str, params: list | None = None, timeout: float = 2.0):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())["result"]


class AnvilProcess:
    """One Anvil node. Use as a context manager, or call stop(); atexit stops it too.
    `restart()` keeps the port (pass `--state FILE` in extra_args to keep the chain too)."""
    name = "Anvil"
    chain_id: int | None = CHAIN_ID  # what the node must answer to count as started

    def __init__(self, port: int | None = None, binary: Path = ANVIL_BIN, extra_args: tuple = (),
                 hardfork: str = "cancun"):
        if not binary.exists():
            raise ToolchainError(f"anvil binary not found at {binary}",
                                 "run scripts/bootstrap.sh (it runs `npm ci`, which installs @foundry-rs/anvil-linux-amd64)")
        if port is not None and port_in_use(port):
            raise ChainUnavailable(f"port {port} on 127.0.0.1 is already in use, so Anvil cannot listen there",
                                   "stop what uses it, or pass no port to pick a free one")
        self.binary, self.extra_args, self.hardfork = binary, tuple(extra_args), hardfork
        self._fixed_port = port
        self.proc: subprocess.Popen | None = None
        self.port = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "AnvilProcess":
        for attempt in range(3):  # a random free port can be taken between probe and bind
            self.port = self._fixed_port or free_port()
            self._log = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent, start_new_session=True)
            atexit.register(self.stop)
            try:
                self._wait_ready()
                return self
            except ChainUnavailable as e:
                self.stop()
                if "in use" in str(e) and self._fixed_port is None and attempt < 2:
                    continue
                raise

    def argv(self) -> list[str]:
        return [str(self.binary), "--host", "127.0.0.1", "--port", str(self.port), "--mnemonic", MNEMONIC,
                "--chain-id", str(CHAIN_ID), "--gas-limit", str(GAS_LIMIT), "--hardfork", self.hardfork,
                *KEEP_NO_OLD_STATES, *self.extra_args]

    def restart(self) -> "AnvilProcess":
        self.stop(keep_port=True)
        return self.start()

    def output_tail(self, n: int = 2000) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-n:]

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.output_tail()
                if "in use" in tail.lower():
                    raise ChainUnavailable(f"{self.name} could not bind port {self.port}: address in use",
                                           "pass another port, or none to pick a free one")
                raise ChainUnavailable(f"{self.name} exited with code {self.proc.returncode} during start-up:\n{tail}",
                                       f"read {self.name}'s output above")
            try:
                if self.chain_id in (None, int(rpc(self.url, "eth_chainId", timeout=1.0), 16)):
                    self._keep_clock()
                    return
            except OSError:
                time.sleep(0.05)
        raise ChainUnavailable(f"{self.name} did not answer on {self.url} within {START_TIMEOUT_S:.0f} s",
                               "check the machine's load and that loopback networking works")

    def _keep_clock(self):
        """Anvil reloads a saved chain (--state) but not its clock offset: a chain whose clock
        was moved forward would mine its next blocks in the past, and every deadline and
        chess clock would misread. Resume the clock from the last block instead."""
        if self.chain_id is None:
            return
        last = int(rpc(self.url, "eth_getBlockByNumber", ["latest", False], timeout=2.0)["timestamp"], 16)
        if last >= time.time():
            rpc(self.url, "evm_setTime", [last + 1], timeout=2.0)

    def check_alive(self):
        """Raise a clear error if the node died under us (called when an RPC call fails)."""
        if self.proc is not None and self.proc.poll() is not None:
            raise ChainUnavailable(f"{self.name} (pid {self.proc.pid}) exited with code {self.proc.returncode}:\n"
                                   f"{self.output_tail()}", "restart it (connect('anvil') again)")

    def stop(self, keep_port: bool = False):
        """keep_port: the next start() listens on the same port (clients reconnect there)."""
        if keep_port:
            self._fixed_port = self.port
        p, self.proc = self.proc, None
        if p is None:
            return
        atexit.unregister(self.stop)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
