"""`verde key`: make a key, and show which key the other commands would sign with."""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..chain import ChainError
from .common import console


def cmd_key_new(args) -> int:
    from eth_account import Account
    acct = Account.create()
    if args.keystore:
        path = Path(args.keystore)
        if path.exists():
            raise ChainError(f"{path} exists; a new key would overwrite the one there", "pick another file name")
        password = os.environ.get("VERDE_KEYSTORE_PASSWORD")
        if not password:
            raise ChainError("no password to encrypt the keystore with", "set VERDE_KEYSTORE_PASSWORD")
        path.write_text(json.dumps(Account.encrypt(acct.key, password)))
        path.chmod(0o600)
        console.print(f"new key {acct.address}, encrypted in {path}; use it with "
                      f"VERDE_KEYSTORE={path} and VERDE_KEYSTORE_PASSWORD", highlight=False)
        console.print(_funding(acct.address), highlight=False)
    else:
        console.print(f"address     {acct.address}\nprivate key {acct.key.to_0x_hex()}\n"
                      "keep the private key secret (VERDE_PRIVATE_KEY=...), or use --keystore FILE", highlight=False)
        console.print(_funding(acct.address), highlight=False)
    return 0


def cmd_key_fund(args) -> int:
    """Send ETH to an address from the local chain's funded test accounts (a key made with
    `verde key new` holds nothing); refused on any other chain."""
    from ..chain.backends import _mnemonic_accounts
    from .common import connect_arg
    from .profiles import is_local
    with connect_arg(args) as chain:
        if not is_local(chain):
            raise ChainError(f"chain id {chain.chain_id} is not a local test chain: `verde key fund` gives away the "
                             "test accounts' ETH, which only a local chain has",
                             "on a real network send ETH to the address from a wallet or an exchange")
        gas = 21_000 * 10**11  # a transfer's gas at a price far above a local chain's
        funder = next((a for a in reversed(_mnemonic_accounts()) if chain.w3.eth.get_balance(a.address) >=
                       args.eth + gas), None)
        if funder is None:
            raise ChainError(f"no funded test account of this chain holds {args.eth / 1e18} ETH",
                             "ask for less (--eth), or restart the node")
        chain._send("fund", {"to": args.address, "value": args.eth, "gas": 21_000}, funder)
        have = chain.w3.eth.get_balance(args.address)
        console.print(f"sent {args.eth / 1e18} ETH to {args.address} from test account {funder.address}; it holds "
                      f"{have / 1e18} ETH", highlight=False)
    return 0


def _funding(address: str) -> str:
    return (f"it holds no ETH yet: on a local chain `verde key fund {address}` (100 ETH from its test accounts); "
            "on a real network send ETH to it from a wallet")


def cmd_key_show(args) -> int:
    from ..chain.backends import load_key
    acct = load_key()
    source = "VERDE_PRIVATE_KEY" if os.environ.get("VERDE_PRIVATE_KEY") else f"keystore {os.environ['VERDE_KEYSTORE']}"
    console.print(f"{acct.address} (from {source})", highlight=False)
    return 0


def add(sub):
    k = sub.add_parser("key", help="make a key, or show the one commands sign with")
    ks = k.add_subparsers(dest="key_cmd", required=True)
    n = ks.add_parser("new", help="a new random key: printed, or written as an encrypted keystore")
    n.add_argument("--keystore", help="write it here, encrypted with VERDE_KEYSTORE_PASSWORD")
    n.set_defaults(fn=cmd_key_new)
    from .common import address, chain_args, eth
    f = ks.add_parser("fund", help="a local chain only: send ETH to ADDRESS from its funded test accounts")
    chain_args(f, deployment=False)
    f.add_argument("address", type=address)
    f.add_argument("--eth", type=eth, default=100 * 10**18, help="how much (default 100)")
    f.set_defaults(fn=cmd_key_fund)
    s = ks.add_parser("show", help="the address of VERDE_PRIVATE_KEY or VERDE_KEYSTORE")
    s.set_defaults(fn=cmd_key_show)
