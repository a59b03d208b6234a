"""ape console script: `ape run deploy_harness [--network ...]` deploys Float32Harness and
evaluates one primitive through the on-chain referee arithmetic."""
import click
from ape import accounts, project
from ape.cli import ConnectedProviderCommand


@click.command(cls=ConnectedProviderCommand)
def cli(network):
    sender = accounts.test_accounts[0]
    harness = project.Float32Harness.deploy(sender=sender)
    one, two = 0x3F800000, 0x40000000
    three = harness.exec(0, one, two, 0)
    click.echo(f"Float32Harness at {harness.address} on {network}: 1.0 + 2.0 -> {three:#010x}")
