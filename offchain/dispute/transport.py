"""Trainers as separate processes: the referee's questions and the answers as JSON lines
over a pipe (stdin/stdout of `python -m offchain.dispute.transport serve ...`). Nothing is
unpickled: answers are plain JSON with bytes in hex, tensors as safetensors bytes, and
element proofs as their fields, so a malicious trainer can only send data."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading

from ..protocol.tensors import ElementProof


class TransportError(RuntimeError):
    pass


def encode(v):
    import torch
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (bytes, bytearray)):
        return {"b": bytes(v).hex()}
    if isinstance(v, (list, tuple)):
        return [encode(x) for x in v]
    if isinstance(v, ElementProof):
        return {"proof": [v.code, list(v.shape), v.chunk, v.index, v.chunk_bytes.hex(), [s.hex() for s in v.siblings]]}
    if isinstance(v, torch.Tensor):
        from safetensors.torch import save
        return {"tensor": save({"t": v.detach().cpu().contiguous()}).hex()}
    raise TransportError(f"cannot send a {type(v).__name__}")


def decode(v):
    if isinstance(v, list):
        return [decode(x) for x in v]
    if isinstance(v, dict):
        if "b" in v:
            return bytes.fromhex(v["b"])
        if "proof" in v:
            code, shape, chunk, index, data, sib = v["proof"]
            return ElementProof(int(code), tuple(int(d) for d in shape), int(chunk), int(index), bytes.fromhex(data),
                                tuple(bytes.fromhex(s) for s in sib))
        if "tensor" in v:
            from safetensors.torch import load
            return load(bytes.fromhex(v["tensor"]))["t"]
        raise TransportError(f"unknown value {sorted(v)}")
    return v


ALLOWED = {"claim_at", "open_claim", "state_leaves", "trace_node", "node", "node_structure", "op_inputs",
           "kernel_count", "kernel_node", "kernel", "kernel_proof", "tensor_root", "tensor_node", "element",
           "final_claim", "fault_node", "fault_kernel"}


class PipeEndpoint:
    """A trainer in another process; each method call is one request line, one answer line."""

    def __init__(self, argv: list[str]):
        from ..chain.anvil import die_with_parent  # (here: the serving side never loads the chain package)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                     preexec_fn=die_with_parent)
        self._lock = threading.Lock()
        try:  # (the trainer trains before it is ready: a Ctrl-C or SIGTERM here must not orphan it)
            ready = self.proc.stdout.readline()
            if not ready.startswith("ready"):
                raise TransportError(f"the trainer process did not start: {ready!r} (exit {self.proc.poll()})")
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise
        self.final = bytes.fromhex(ready.split()[1])

    def __getattr__(self, method):
        if method not in ALLOWED:
            raise AttributeError(method)

        def call(*args):
            with self._lock:
                self.proc.stdin.write(json.dumps({"method": method, "args": encode(list(args))}) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
            if not line:
                raise TransportError(f"the trainer process closed the pipe (exit {self.proc.poll()})")
            msg = json.loads(line)
            if "error" in msg:
                raise TransportError(msg["error"])
            return decode(msg["ok"])
        return call

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def serve(trainer, rfile=sys.stdin, wfile=sys.stdout) -> None:
    from .party import InProcess
    ep = InProcess(trainer)
    wfile.write(f"ready {trainer.final_claim().hex()}\n")
    wfile.flush()
    for line in rfile:
        try:
            req = json.loads(line)
            if req.get("method") not in ALLOWED:
                raise TransportError(f"unknown method {req.get('method')!r}")
            args = decode(req.get("args", []))
            for i, a in enumerate(args):  # the kernel-tensor selector travels as a list
                if isinstance(a, list) and a and isinstance(a[0], str):
                    args[i] = tuple(a)
            out = {"ok": encode(getattr(ep, req["method"])(*args))}
        except Exception as e:  # noqa: BLE001 - reported to the referee, who decides
            out = {"error": f"{type(e).__name__}: {e}"}
        wfile.write(json.dumps(out) + "\n")
        wfile.flush()


def main(argv=None):
    ap = argparse.ArgumentParser(description="Serve a trainer's dispute answers over stdin/stdout.")
    ap.add_argument("command", choices=["serve"])
    ap.add_argument("--job", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--behaviour", default="honest")
    args = ap.parse_args(argv)
    from ..trainer.adversaries import from_spec
    from ..protocol.jobfile import load
    from ..trainer import Trainer
    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints must not corrupt the protocol
    t = Trainer(load(args.job), args.workdir, args.name, behaviour=from_spec(args.behaviour))
    t.train()
    serve(t, sys.stdin, out)


if __name__ == "__main__":
    main()
