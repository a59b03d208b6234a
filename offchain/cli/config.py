"""Where `verde` finds the chain and the deployment when a command is not told: the flag,
else the environment (VERDE_CHAIN, VERDE_DEPLOYMENT), else a config file (VERDE_CONFIG, or
./verde.toml), so a trainer or a client sets them once:

    chain = "rpc:http://127.0.0.1:8545"
    deployment = "deployment.json"

Keys stay in the environment (VERDE_PRIVATE_KEY, or VERDE_KEYSTORE + its password)."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from ..chain import ChainError

ENV = {"chain": "VERDE_CHAIN", "deployment": "VERDE_DEPLOYMENT"}


def config_file() -> Path:
    return Path(os.environ.get("VERDE_CONFIG", "verde.toml"))


def setting(name: str) -> str | None:
    """name: "chain" or "deployment"; from the environment, then the config file."""
    if os.environ.get(ENV[name]):
        return os.environ[ENV[name]]
    path = config_file()
    if not path.exists():
        if "VERDE_CONFIG" in os.environ:
            raise ChainError(f"VERDE_CONFIG names {path}, which does not exist", "create it, or unset VERDE_CONFIG")
        return None
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ChainError(f"cannot read the config file {path}: {e}",
                         'write it as TOML: chain = "rpc:http://127.0.0.1:8545" and deployment = "deployment.json"'
                         ) from None
    unknown = set(data) - set(ENV)
    if unknown:
        raise ChainError(f"{path} has unknown settings: {', '.join(sorted(unknown))}",
                         f"it may set only {', '.join(ENV)} (keys stay in the environment)")
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise ChainError(f"{path}: {name} must be a string, not {type(value).__name__}", f'write {name} = "..."')
    return value


def resolve(args) -> None:
    """Fill args.chain / args.deployment that no flag gave; a missing chain says how to give one."""
    if getattr(args, "chain", None) is None:
        args.chain = setting("chain")
        if args.chain is None:
            raise ChainError("no chain given", "pass --chain rpc:URL, or set VERDE_CHAIN, or put "
                             f'chain = "rpc:URL" in {config_file()}')
    if getattr(args, "deployment", "") is None:
        args.deployment = setting("deployment") or "deployment.json"
