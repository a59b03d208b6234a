"""The `verde` command line: one module per group of commands (chain.py: compile, node,
deploy; client.py: post, status, watch, withdraw; trainer.py: agent; demo.py: demo, with
main_job.py its on-chain part), the shared pieces in common.py."""
from __future__ import annotations

import argparse
import signal
import threading

from ..chain import ChainError
from . import chain as chain_cmds
from . import client, demo, trainer
from .common import console

GROUPS = (demo, chain_cmds, client, trainer)


def main(argv=None, chain=None) -> int:
    """`chain`: a connected Chain to use instead of --chain (the ape scripts pass ape's)."""
    p = argparse.ArgumentParser(prog="verde", description="Verifiable delegated training (Verde + RepOps)")
    sub = p.add_subparsers(dest="cmd", required=True)
    for group in GROUPS:
        group.add(sub)
    args = p.parse_args(argv)
    if chain is not None:
        args.chain = chain
    _sigterm_interrupts()
    try:
        return args.fn(args)
    except ChainError as e:
        console.print(f"[red]error:[/] {e}")
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130


def _sigterm_interrupts():
    """SIGTERM takes the Ctrl-C path: every `with` and `finally` runs, so the nodes and the
    agent processes a command started are stopped (a plain SIGTERM would leave them running)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)
