"""Compile contracts/ through solc's standard-JSON interface (py-solc-x over the solcjs
shim), caching artifacts by a hash of the compiler, settings and every source byte."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import CompileError, ToolchainError

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = ROOT / "contracts"
CACHE = ROOT / ".cache" / "contracts"
SOLC_VERSION = "0.8.37"
# Forge test files use cheatcodes and are compiled by forge only.
EXCLUDE_DIRS = ("test",)
SETTINGS = {
    "optimizer": {"enabled": True, "runs": 200},
    # The IR pipeline keeps Yul variables in place instead of shuffling the stack: the
    # soft-float's medians fall 2-3x (benchmarks/softfloat_gas.py). ape-config.yaml says
    # the same, so `ape run verde` deploys this bytecode; forge's unit/fuzz tests (semantics,
    # no gas) keep the faster legacy pipeline (foundry.toml).
    "viaIR": True,
    # Cancun is the newest fork both py-evm (embedded chain) and Anvil execute identically.
    "evmVersion": "cancun",
    # immutableReferences and the AST (reduced to the immutables' names and types, then
    # dropped: _immutables) let chain/integrity.py compare deployed code with ours.
    "outputSelection": {"*": {"": ["ast"], "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object",
                                                  "evm.deployedBytecode.immutableReferences"]}},
}


@dataclass(frozen=True)
class Artifact:
    name: str
    source: str
    abi: list
    bytecode: bytes
    deployed_bytecode: bytes
    # Each immutable of the runtime code: (name, Solidity type, ((offset, length), ...)): the
    # places in deployed_bytecode (zeros there) where the constructor writes its value.
    immutables: tuple = ()


class Artifacts(dict):
    """Contract name -> Artifact; a missing name says which ones exist."""

    def __missing__(self, name):
        raise KeyError(f"no compiled contract named {name!r}; known: {', '.join(sorted(self))}")


def solc_binary() -> Path:
    """The registered shim (scripts/bootstrap.sh writes it); checked before use."""
    folder = Path(os.environ.get("SOLCX_BINARY_PATH", ROOT / ".venv" / "solcx"))
    exe = folder / f"solc-v{SOLC_VERSION}"
    if not exe.exists():
        raise ToolchainError(f"solc {SOLC_VERSION} shim not registered at {exe}",
                             "run scripts/bootstrap.sh (or either README command) once")
    if shutil.which("node") is None:
        raise ToolchainError("Node.js (node) is not on PATH; the Solidity compiler is solcjs on node",
                             "install Node.js >= 18 and run scripts/bootstrap.sh")
    return exe


def source_files(root: Path = CONTRACTS) -> dict[str, str]:
    files = {}
    for p in sorted(root.rglob("*.sol")):
        rel = p.relative_to(root)
        if rel.parts[0] in EXCLUDE_DIRS:
            continue
        files[rel.as_posix()] = p.read_text()
    return files


def _cache_key(sources: dict[str, str]) -> str:
    h = hashlib.sha256(json.dumps({"solc": SOLC_VERSION, "settings": SETTINGS}, sort_keys=True).encode())
    for name, text in sorted(sources.items()):
        h.update(name.encode() + b"\0" + hashlib.sha256(text.encode()).digest())
    return h.hexdigest()


def _run_solc(sources: dict[str, str], base: Path) -> dict:
    import solcx
    from solcx.exceptions import SolcError

    std_input = {"language": "Solidity", "sources": {n: {"content": t} for n, t in sources.items()},
                 "settings": SETTINGS}
    try:
        out = solcx.compile_standard(std_input, solc_binary=solc_binary(), base_path=str(base),
                                     allow_paths=str(base))
    except SolcError as e:
        # py-solc-x raises on any error entry; re-read the JSON so the message is solc's own.
        out = json.loads(e.stdout_data) if getattr(e, "stdout_data", None) else None
        if out is None:
            raise CompileError(f"solc failed: {e.stderr_data or e}", "see the message above") from None
    errors = [e for e in out.get("errors", []) if e.get("severity") == "error"]
    if errors:
        msg = "\n".join(e.get("formattedMessage", e.get("message", "")) for e in errors)
        raise CompileError(f"Solidity compilation failed:\n{msg}", "fix the source lines named above")
    return out


def _immutables(out: dict) -> dict:
    """{AST id: (name, type)} of every immutable state variable, read off the sources' ASTs,
    which are then dropped from `out` (the cache keeps only what is used)."""
    found = {}

    def walk(node):
        if isinstance(node, dict):
            if node.get("nodeType") == "VariableDeclaration" and node.get("mutability") == "immutable":
                found[str(node["id"])] = (node["name"], node["typeDescriptions"]["typeString"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    for src in out.get("sources", {}).values():
        walk(src.pop("ast", None))
    return found


def compile_contracts(root: Path = CONTRACTS, use_cache: bool = True) -> Artifacts:
    sources = source_files(root)
    if not sources:
        raise CompileError(f"no .sol files under {root}", "run from a Verde checkout")
    key = _cache_key(sources)
    cached = CACHE / f"{key}.json"
    if use_cache and cached.exists():
        out = json.loads(cached.read_text())
    else:
        import fcntl
        CACHE.mkdir(parents=True, exist_ok=True)
        # One compile at a time per checkout (~40 s through the IR pipeline): a second
        # process (a test worker, an agent) waits and reads what the first one wrote.
        with open(CACHE / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if use_cache and cached.exists():
                out = json.loads(cached.read_text())
            else:
                out = _run_solc(sources, root)
                out["immutables"] = _immutables(out)
                tmp = cached.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(json.dumps(out))
                tmp.replace(cached)  # atomic: a reader never sees half a file
    arts = Artifacts()
    for src, contracts in out["contracts"].items():
        for name, c in contracts.items():
            code = c["evm"]["bytecode"]["object"]
            if not code:  # interfaces and abstract contracts
                continue
            refs = c["evm"]["deployedBytecode"].get("immutableReferences", {})
            imm = tuple((*out["immutables"][ast_id], tuple((r["start"], r["length"]) for r in places))
                        for ast_id, places in sorted(refs.items(), key=lambda kv: int(kv[0])))
            arts[name] = Artifact(name, src, c["abi"], bytes.fromhex(code),
                                  bytes.fromhex(c["evm"]["deployedBytecode"]["object"]), imm)
    return arts
