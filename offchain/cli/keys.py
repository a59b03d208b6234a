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
    else:
        console.print(f"address     {acct.address}\nprivate key {acct.key.to_0x_hex()}\n"
                      "keep the private key secret (VERDE_PRIVATE_KEY=...), or use --keystore FILE", highlight=False)
    return 0


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
    s = ks.add_parser("show", help="the address of VERDE_PRIVATE_KEY or VERDE_KEYSTORE")
    s.set_defaults(fn=cmd_key_show)
