"""How the protocol and on-chain tests play a job: an honest trainer trained on it, and the
referee's dispute between two trainers in this process (on chain: conftest's settle_match)."""
from offchain.dispute.context import Context
from offchain.dispute.party import InProcess, Party
from offchain.dispute.referee import dispute
from offchain.protocol.jobfile import load
from offchain.trainer import Trainer


def trained(job_file, d):
    """-> (job, its referee context, an honest trainer that has trained it in d / "honest")."""
    job = load(job_file)
    honest = Trainer(job, d / "honest", "honest")
    honest.train()
    return job, Context(job), honest


def off_chain(ctx, first, second):
    """The off-chain referee's verdict on trainers `first` (seat 0) and `second`."""
    return dispute(ctx, *(Party(t.name, InProcess(t), deadline_s=120, final=t.final_claim()) for t in (first, second)))
