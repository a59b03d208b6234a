"""ape console script: the chain-facing `verde` commands on ape's connected network.

From any directory: `verde ape run verde ...` (ape finds this script only in the repository).

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
from offchain.cli.profiles import LOCAL_CHAIN_IDS

SUBCOMMANDS = ("node", "deploy", "post", "status", "watch", "agent", "withdraw")


def _chain(network, index: int) -> Chain:
    provider = ape_chain.provider
    # ethereum:local:test (embedded) or ethereum:local:foundry, or a URL to a local test node
    # (`verde node`, Anvil: chain id 31337), whose funded accounts are ape's test mnemonic's
    local = network.name == "local" or provider.web3.eth.chain_id in LOCAL_CHAIN_IDS
    if os.environ.get("VERDE_PRIVATE_KEY") or os.environ.get("VERDE_KEYSTORE"):
        account = load_key()
    elif local:
        from eth_account import Account
        account = Account.from_key(accounts.test_accounts[index].private_key)
    else:
        raise click.UsageError(f"set VERDE_PRIVATE_KEY (or VERDE_KEYSTORE) for a non-local network (chain id "
                               f"{provider.web3.eth.chain_id}; only a local test node, chain id 31337, signs with "
                               "ape's test accounts)")
    return Chain(provider.web3, [account], f"ape {network.choice}", compile_contracts(), local=local)


@click.command(cls=ConnectedProviderCommand, context_settings={"ignore_unknown_options": True})
@click.argument("subcommand", type=click.Choice(SUBCOMMANDS))
@click.argument("rest", nargs=-1, type=click.UNPROCESSED)
@click.option("--account-index", default=0, show_default=True, help="ape test account to sign with (local networks)")
def cli(network, subcommand, rest, account_index):
    os.chdir(os.environ.get("VERDE_USER_CWD", os.getcwd()))  # `verde ape` ran ape in the repository
    if subcommand == "node":  # starts a chain: nothing to sign
        raise SystemExit(verde_cli.main(["node", *rest]))
    chain = _chain(network, account_index)
    if subcommand in ("deploy", "post") and ape_chain.provider.name == "test":
        click.echo(f"warning: {network.choice} is ape's in-process chain: it vanishes when this command exits, and "
                   f"so does what `{subcommand}` writes to it (a deployment file for it points nowhere). For a chain "
                   "that lasts: `verde node` and --network http://127.0.0.1:8545, or --network "
                   "ethereum:local:foundry", err=True)
    raise SystemExit(verde_cli.main([subcommand, "--chain", "ape", *rest], chain=chain))
