"""What every group of `verde` commands shares: the console, amounts in ETH, a chain from
--chain (or the Chain the ape scripts pass), the Verde contracts from a deployment file."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..chain import ChainError

console = Console()
STATUS = ("none", "open", "disputed", "settled")


def step(msg: str):
    console.print(f"[bold cyan]==>[/] {msg}")


def verde_of(args):
    import json

    from ..chain.verde import Verde
    chain = connect_arg(args)  # resolves --chain and --deployment
    try:
        deployment = json.loads(Path(args.deployment).read_text())
    except OSError as e:
        chain.close()
        raise ChainError(f"cannot read the deployment file {args.deployment}: {e.strerror}",
                         "run `verde deploy --out FILE` first, or pass --deployment FILE") from None
    except ValueError as e:
        chain.close()
        raise ChainError(f"the deployment file {args.deployment} is not JSON: {e}", "re-run `verde deploy`") from None
    try:
        return chain, Verde.attach(chain, deployment)
    except BaseException:
        chain.close()
        raise


def eth(value: str) -> int:
    from decimal import Decimal, InvalidOperation
    try:
        wei = Decimal(value) * 10**18
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{value!r} is not an amount of ETH") from None
    if wei <= 0 or wei != wei.to_integral_value():
        raise argparse.ArgumentTypeError(f"{value!r}: amounts must be positive, at most 18 decimals")
    return int(wei)


def bounded(lo: int, hi: int):
    """An argparse type: an integer in [lo, hi] (a uint8 on chain, say), named when it is not."""
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{n} is not between {lo} and {hi}")
        return n
    return parse


def _positive(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = 0.0
    if not x > 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive number")
    return x


def address(value: str) -> str:
    from web3 import Web3
    if not Web3.is_address(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not an Ethereum address (0x and 40 hex digits)")
    return Web3.to_checksum_address(value)


def connect_arg(args):
    """--chain is a spec; the ape scripts (scripts/verde.py) pass a Chain built on ape's provider."""
    from ..chain import Chain, connect
    from .config import resolve
    resolve(args)
    chain = args.chain if isinstance(args.chain, Chain) else connect(args.chain)
    if getattr(args, "max_fee_gwei", None) is not None:
        chain.max_fee_wei = int(args.max_fee_gwei * 10**9)
    return chain


def load_job(path, fix: str = "correct the job file (every error names its field)"):
    """A job file, or the usage error that names its bad field (exit 2 through main)."""
    from ..protocol.job import JobError
    from ..protocol.jobfile import load
    try:
        return load(path)
    except JobError as e:
        raise ChainError(str(e), fix) from None


def existing_job(v, job_id: int):
    j = v.status(job_id)
    if j[2] == 0:  # Status.None: never posted
        raise ChainError(f"no job {job_id} in this registry", "check the id (`verde post` printed it)")
    return j


def chain_args(q, deployment: bool = True):
    """--chain (and --deployment): how a command reaches a running node and its contracts;
    when not given, from the environment or verde.toml (config.py)."""
    q.add_argument("--chain", help="rpc:URL (key: VERDE_PRIVATE_KEY or VERDE_KEYSTORE) or anvil:PORT "
                                   "(default: VERDE_CHAIN, or chain in verde.toml)")
    q.add_argument("--max-fee-gwei", type=_positive, default=None, metavar="GWEI",
                   help="the most a transaction may pay per gas: one not mined is re-sent at its nonce with fees "
                        "raised by 12.5%% up to this (default: VERDE_MAX_FEE_GWEI, or 500)")
    if deployment:
        q.add_argument("--deployment", help="written by `verde deploy` (default: VERDE_DEPLOYMENT, deployment in "
                                            "verde.toml, or deployment.json)")
