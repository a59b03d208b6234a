"""`verde` commands that run or set up a chain: compile, node, deploy."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..chain.anvil import MNEMONIC
from ..chain.backends import N_ACCOUNTS
from ..chain import ChainError
from .common import bounded, chain_args, connect_arg, console, eth


def cmd_compile(args) -> int:
    from ..chain import compile_contracts
    t = time.time()
    arts = compile_contracts(use_cache=not args.force)
    console.print(f"compiled {len(arts)} contracts in {time.time() - t:.1f} s: {', '.join(sorted(arts))}")
    deployed = {n: len(a.deployed_bytecode) for n, a in arts.items() if a.deployed_bytecode}
    console.print("deployed code, bytes (EIP-170 allows 24,576): " +
                  ", ".join(f"{n} {size:,}" for n, size in sorted(deployed.items(), key=lambda kv: -kv[1])))
    return 0


def cmd_node(args) -> int:
    """Run a local node in the foreground, for agents, `verde` commands or ape to connect to."""
    from ..chain import AnvilProcess
    from ..chain.embedded_node import EmbeddedNodeProcess
    if args.block_time < 0:
        console.print("[red]error:[/] --block-time must be >= 0 (0: mine only on a transaction)")
        return 2
    if args.embedded:
        node = EmbeddedNodeProcess(port=args.port, block_time=args.block_time)
    else:
        interval = ("--block-time", f"{args.block_time:g}", "--mixed-mining") if args.block_time else ()
        node = AnvilProcess(port=args.port, extra_args=(("--state", args.state) if args.state else ()) + interval)
    with node:
        kept = f"; state kept in {args.state}" if args.state and not args.embedded else ""
        kept += (f"; a block every {args.block_time:g} s when idle" if args.block_time else
                 "; blocks only on transactions (the clock stands still while idle)")
        console.print(f"{node.name} listening on {node.url}{kept}; Ctrl-C stops it")
        console.print(f"all {N_ACCOUNTS} funded test keys (the mnemonic `{MNEMONIC}`), ready to use: "
                      "export VERDE_PRIVATE_KEY=<key> and VERDE_CHAIN=rpc:" + node.url + "; a key of your own "
                      "(verde key new): verde key fund ADDRESS", highlight=False)
        from ..chain.backends import _mnemonic_accounts
        for i, a in enumerate(_mnemonic_accounts(N_ACCOUNTS)):
            console.print(f"  ({i}) {a.address}  {a.key.to_0x_hex()}", highlight=False)
        try:
            while node.proc.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        node.check_alive()
    return 0


def cmd_deploy(args) -> int:
    import json

    from ..chain.verde import Delivery, Floors, Verde
    with connect_arg(args) as chain:  # (resolves args.deployment)
        out = Path(args.deployment)
        if not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
            raise ChainError(f"cannot write the deployment file {out}: {out.parent} is not a writable directory",
                             "pass --out in a directory you can write (before anything is deployed)")
        from .profiles import applies, profile_of
        prof = profile_of(chain)

        def given(value, default):
            return default if value is None else value
        floors = Floors(given(args.min_clock_s, prof.floors.clock_s),
                        given(args.min_commit_window_s, prof.floors.commit_window_s),
                        given(args.min_reveal_window_s, prof.floors.reveal_window_s))
        delivery = Delivery(given(args.delivery_window_s, prof.delivery_window_s),
                            given(args.answer_window_s, prof.answer_window_s), args.challenge_bond)
        v = Verde.deploy(chain, floors, delivery)
        out.write_text(json.dumps(v.addresses(), indent=1))
        console.print(f"deployed JobRegistry {v.registry.address}, DisputeGame {v.game.address}, "
                      f"OperatorGame {v.operators.address}; wrote {args.deployment}")
        console.print(f"  {applies(chain)}: floors clock {floors.clock_s} s, commit window {floors.commit_window_s} s, "
                      f"reveal window {floors.reveal_window_s} s; delivery window {delivery.window_s} s, answer "
                      f"window {delivery.answer_s} s", highlight=False)
    return 0


def cmd_ape(args) -> int:
    """ape finds `scripts/verde.py` only in the project it runs in (its working directory):
    run it in the repository, and let the script come back to the user's directory so that
    the paths the user passes (a job file, --out) mean what they meant."""
    import shutil
    import subprocess
    from ..chain.compiler import ROOT
    exe = shutil.which("ape") or str(Path(sys.executable).with_name("ape"))
    if not Path(exe).exists():
        raise ChainError("ape is not installed in this environment", "run `bash scripts/bootstrap.sh` (it installs "
                         "the pinned eth-ape and its plugins into .venv), then use .venv/bin/verde ape ...")
    if not (ROOT / "ape-config.yaml").exists():
        raise ChainError(f"{ROOT} holds no ape-config.yaml: this verde is not a checkout of the repository",
                         "run verde from a clone of the Verde repository (pip install -e .)")
    env = {**os.environ, "VERDE_USER_CWD": os.getcwd(),
           "SOLCX_BINARY_PATH": os.environ.get("SOLCX_BINARY_PATH", str(ROOT / ".venv" / "solcx"))}
    return subprocess.run([exe, *args.rest], cwd=ROOT, env=env).returncode


def add(sub):
    a = sub.add_parser("ape", help="run ape in the repository from any directory (e.g. verde ape run verde deploy "
                                   "--network http://127.0.0.1:8545)", add_help=False)
    a.add_argument("rest", nargs=argparse.REMAINDER, help="ape's arguments")
    a.set_defaults(fn=cmd_ape)
    c = sub.add_parser("compile", help="compile contracts/ (cached)")
    c.add_argument("--force", action="store_true", help="recompile even if cached")
    c.set_defaults(fn=cmd_compile)
    n = sub.add_parser("node", help="run a local chain in the foreground (Anvil, or the embedded one)")
    n.add_argument("--port", type=bounded(1, 65535), default=8545)
    n.add_argument("--embedded", action="store_true", help="serve the embedded py-evm chain instead of Anvil")
    n.add_argument("--state", help="Anvil: load the chain from FILE and save it there on exit (survives restarts)")
    n.add_argument("--block-time", type=float, default=2.0,
                   help="mine a block every this many idle seconds, so deadlines pass on an idle chain as on a "
                        "real one (default 2; 0: only on transactions)")
    n.set_defaults(fn=cmd_node)
    q = sub.add_parser("deploy", help="deploy the contracts; write their addresses")
    chain_args(q, deployment=False)
    q.add_argument("--out", dest="deployment", help="the deployment file (default: VERDE_DEPLOYMENT, deployment in verde.toml, or "
                                 "deployment.json)")
    from ..chain.verde import ANSWER_GAS_PER_CHUNK, BOND_GAS_PRICE, Delivery
    from .profiles import LOCAL, PUBLIC

    def defaults(attr):
        return f"(default {getattr(PUBLIC, attr)}; on a local chain {getattr(LOCAL, attr)})"
    for name, attr, what in (("clock", "clock_s", "each party's dispute clock"),
                             ("commit-window", "commit_window_s", "from the join deadline to the commit one"),
                             ("reveal-window", "reveal_window_s", "from the commit deadline to the reveal one")):
        q.add_argument(f"--min-{name}-s", type=int, default=None,
                       help=f"the least {what} a job may give, in seconds (default {getattr(PUBLIC.floors, attr)}; "
                            f"on a local chain {getattr(LOCAL.floors, attr)}; a real network wants hours)")
    q.add_argument("--delivery-window-s", type=bounded(0, 2**64 - 1), default=None,
                   help="after settlement, how long an accepted trainer's pay is held so the client can challenge "
                        f"its delivery {defaults('delivery_window_s')}: 0 pays at once, no remedy; a real network "
                        "wants days")
    q.add_argument("--answer-window-s", type=bounded(1, 2**64 - 1), default=None,
                   help="a challenged trainer's time to put one challenge's chunks (up to 64) on chain, counted from "
                        f"the previous challenge's deadline {defaults('answer_window_s')}")
    q.add_argument("--challenge-bond", type=eth, default=Delivery.bond_wei,
                   help="ETH the client pays per challenged chunk: the trainer's for each chunk it answers (its "
                        "gas), the client's back for each one left unanswered (default "
                        f"{Delivery.bond_wei / 1e18}: {ANSWER_GAS_PER_CHUNK:,} gas, an answer's per chunk at the "
                        f"largest chunk, at {BOND_GAS_PRICE / 1e9:g} gwei; size it to your network's gas price)")
    q.set_defaults(fn=cmd_deploy)
