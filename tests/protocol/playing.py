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


def off_chain(ctx, first, second, finals: dict | None = None):
    """The off-chain referee's verdict on trainers `first` (seat 0) and `second`. finals: the
    claims they posted, by name (default: their final claims now)."""
    finals = finals or {t.name: t.final_claim() for t in (first, second)}
    return dispute(ctx, *(Party(t.name, InProcess(t), deadline_s=120, final=finals[t.name]) for t in (first, second)))


def honest_wins_off_chain(ctx, honest, bad) -> list:
    """The off-chain referee's verdicts with the cheater in seat 1, then in seat 0: each must
    make the honest trainer the winner and the cheater the only loser. The final claims are
    the ones posted before both games (a stops-early cheater's answers re-execute, and its
    final claim is then another). -> both verdicts."""
    finals = {t.name: t.final_claim() for t in (honest, bad)}
    assert finals[honest.name] != finals[bad.name], "the cheater must change the result to be disputed"
    verdicts = []
    for first, second in ((honest, bad), (bad, honest)):
        v = off_chain(ctx, first, second, finals)
        assert v.winner == honest.name and v.losers == [bad.name], str(v)
        verdicts.append(v)
    return verdicts


def honest_paid_on_chain(settle_match, job, ctx, bad, honest, level: int):
    """The match on chain, the cheater in seat 0: the honest trainer wins at `level` and
    withdraws the payment and both stakes, the cheater nothing. -> the settled match."""
    r = settle_match(job, ctx, bad, honest)
    assert r.decision["winner"] == r.second and r.decision["level"] == level, r.decision
    assert r.paid_and_slashed(r.second, r.first)
    return r
