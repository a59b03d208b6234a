"""ape console script: the chain-facing `verde` commands on ape's connected network.

    ape run verde node     -- --port 8545 [--state FILE | --embedded]   (start a local chain)
    ape run verde deploy   [--network ...] [-- --out deployment.json]
    ape run verde post     --network ... -- JOB_FILE --payment 3 --stake 1
    ape run verde status   --network ... -- 1
    ape run verde watch    --network ... -- 1
    ape run verde agent    --network ... -- JOB_FILE 1 --workdir DIR
    ape run verde withdraw --network ...

Everything after `--` is the `verde` subcommand's own arguments (`verde SUBCOMMAND -h`).
The key: ape's test account (`--account-index`, local networks), or VERDE_PRIVATE_KEY.
The same code as the `verde` command runs; only the chain comes from ape's provider."""
import os

import click
from ape import accounts, chain as ape_chain
from ape.cli import ConnectedProviderCommand

from offchain import cli as verde_cli
from offchain.chain import Chain, compile_contracts, load_key

SUBCOMMANDS = ("node", "deploy", "post", "status", "watch", "agent", "withdraw")


def _chain(network, index: int) -> Chain:
    provider = ape_chain.provider
    local = network.name == "local"  # ethereum:local:test (embedded) or ethereum:local:foundry
    if os.environ.get("VERDE_PRIVATE_KEY") or os.environ.get("VERDE_KEYSTORE"):
        account = load_key()
    elif local:
        from eth_account import Account
        account = Account.from_key(accounts.test_accounts[index].private_key)
    else:
        raise click.UsageError("set VERDE_PRIVATE_KEY (or VERDE_KEYSTORE) for a non-local network")
    return Chain(provider.web3, [account], f"ape {network.choice}", compile_contracts(), local=local)


@click.command(cls=ConnectedProviderCommand, context_settings={"ignore_unknown_options": True})
@click.argument("subcommand", type=click.Choice(SUBCOMMANDS))
@click.argument("rest", nargs=-1, type=click.UNPROCESSED)
@click.option("--account-index", default=0, show_default=True, help="ape test account to sign with (local networks)")
def cli(network, subcommand, rest, account_index):
    if subcommand == "node":  # starts a chain: nothing to sign
        raise SystemExit(verde_cli.main(["node", *rest]))
    chain = _chain(network, account_index)
    if subcommand in ("deploy", "post") and ape_chain.provider.name == "test":
        click.echo(f"warning: {network.choice} is ape's in-process chain: it vanishes when this command exits, and "
                   f"so does what `{subcommand}` writes to it (a deployment file for it points nowhere). For a chain "
                   "that lasts: `verde node` and --network http://127.0.0.1:8545, or --network "
                   "ethereum:local:foundry", err=True)
    raise SystemExit(verde_cli.main([subcommand, "--chain", "ape", *rest], chain=chain))
