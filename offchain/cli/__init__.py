"""The `verde` command line: one module per group of commands (chain.py: compile, node,
deploy; client.py: post, status, watch, fetch, challenge, release, settle, withdraw; report.py: report;
trainer.py: agent, train; keys.py: key; demo.py: demo, with main_job.py its on-chain part), the shared pieces in
common.py, the local and public defaults in profiles.py."""
from __future__ import annotations

import argparse
import os
import signal
import threading

from rich.markup import escape

from ..chain import ChainError
from . import chain as chain_cmds
from . import client, demo, keys, report, trainer
from .common import console

GROUPS = (demo, chain_cmds, client, report, trainer, keys)
ROLES = """by role:
  anyone    demo                        the main job end to end (README command 1)
            node, deploy, compile        a local chain and the contracts
            key new | key show           make a key; which key signs
            key fund ADDR [--eth N]      a local chain: fund a key from its test accounts
  client    post JOB --payment --stake   post a job (--only ADDR: named trainers only)
            status ID [--json], watch ID the job: deadlines, seats, matches, what is owed
            fetch ID JOB --from STORE    the accepted model, checked against the chain
            challenge ID JOB --trainer A an accepted trainer must put chunks on chain (--from STORE:
                                         every one you lack; a bond each), or pay you
            release ID                   got the model: pay the accepted trainers now
            withdraw                     take what the registry owes your key
  anyone    settle ID                    move a job on: settle once revealed or due (refunds a job
                                         nobody joined), open its match, time out a silent party
            report ID [JOB] --out PNG    any job's report from the chain: phases, bisection, gas, payouts
  trainer   train JOB                    train locally, no chain: the claim you would commit
            agent JOB [ID] --workdir D   join, train, commit, reveal, dispute, publish, answer
                                         delivery challenges, withdraw

examples:
  verde node &                                   # prints funded test keys
  export VERDE_CHAIN=rpc:http://127.0.0.1:8545 VERDE_PRIVATE_KEY=0x...
  verde deploy && verde post job.yaml --payment 3 --stake 1
  verde agent job.yaml --workdir trainer-a       # each trainer its own key and workdir
  verde status 1

chain and deployment: --chain/--deployment, else VERDE_CHAIN/VERDE_DEPLOYMENT, else verde.toml;
keys: VERDE_PRIVATE_KEY, or VERDE_KEYSTORE + VERDE_KEYSTORE_PASSWORD."""


def main(argv=None, chain=None) -> int:
    """`chain`: a connected Chain to use instead of --chain (the ape scripts pass ape's)."""
    try:
        return _main(argv, chain)
    except BrokenPipeError:  # the reader stopped (`verde ... | head`): no traceback, and none at exit
        import sys
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv, chain) -> int:
    p = argparse.ArgumentParser(prog="verde", description="Verifiable delegated training (Verde + RepOps)",
                                epilog=ROLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--debug", action="store_true", default=bool(os.environ.get("VERDE_DEBUG")),
                   help="show the traceback of an unexpected error (or VERDE_DEBUG=1)")
    sub = p.add_subparsers(dest="cmd", required=True)
    for group in GROUPS:
        group.add(sub)
    args = p.parse_args(argv)
    if chain is not None:
        args.chain = chain
    _sigterm_interrupts()
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130
    except Exception as e:
        if args.debug:
            raise
        e = _model_s(e)
        console.print(f"[red]error:[/] {escape(_said(e))}", highlight=False)  # brackets in a message are text
        return 1 if _unexpected(e) else 2


def _model_s(e: Exception) -> Exception:
    """An error an op of a client's program raised (in any command: train, agent, demo) is the
    model's: said with the op and the model's line (exit 2), not as a bug in verde. A command
    that never loaded torch ran no program (and its error is said without the ~2 s import)."""
    import sys
    if "torch" not in sys.modules:
        return e
    from ..protocol.model_errors import explain, program_node
    if program_node(e.__traceback__) is None:
        return e
    return explain(e, "while running") or e


def _unexpected(e: Exception) -> bool:
    """Not one of the errors a user causes and the message explains (exit 2): a bug, or the
    environment failing under us (exit 1)."""
    import sys
    from ..protocol.job import JobError
    from repops.errors import RepOpsError
    said = (ChainError, JobError, RepOpsError, OSError)
    delivery = sys.modules.get("offchain.protocol.delivery")  # (loaded by any command that can raise it: it
    if delivery is not None:                                 # imports torch, ~2 s an error would pay)
        said += (delivery.DeliveryError,)
    return not isinstance(e, said)


def _said(e: Exception) -> str:
    if isinstance(e, OSError) and not isinstance(e, ConnectionError) and e.filename:
        return (f"{e.strerror or e} : {e.filename}\n  Fix: check that path (it exists, is the right kind of file, and "
                "you may read or write it)")
    if _unexpected(e):
        return (f"unexpected {type(e).__name__}: {e}\n  This is a bug in verde or a failure around it (disk, "
                "memory); re-run with --debug for the traceback and report it with that output")
    return str(e)


def _sigterm_interrupts():
    """SIGTERM takes the Ctrl-C path: every `with` and `finally` runs, so the nodes and the
    agent processes a command started are stopped (a plain SIGTERM would leave them running)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)
