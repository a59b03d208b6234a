"""The pre-stake scan of a job's data for faults (offchain/protocol/datacheck.py): a label
outside [0, classes), an embedding index outside [0, num_embeddings), an index of x[i] or
gather out of range, a binary cross entropy target outside [0, 1], in a row that only a
later step reads (one meta step and a real step on batch 0 pass such a job) is named by row
before anyone posts or stakes; a clean job and a label equal to ignore_index pass."""
import pytest
import torch

from offchain.chain.verde import Verde
from offchain.dispute.context import Context
from offchain.protocol import datacheck
from offchain.protocol.dataset import write_program_job
from offchain.protocol.jobfile import load
from small_job import classifier_data, first_read_at, write_classifier_job


def _labelled(tmp_path, row=None, label=None):
    data = classifier_data()
    if row is not None:
        data["y"][row] = label
    return load(write_classifier_job(tmp_path / "job", data))


def test_a_label_out_of_range_that_step_3_reads_is_named_by_row(tmp_path):
    row = first_read_at(3)
    job = _labelled(tmp_path, row, 12)
    with pytest.raises(datacheck.DataOutOfRange,
                       match=rf"data tensor `y` row {row} holds 12, outside \[0, 5\) of aten.nll_loss_forward.default "
                             rf"\(node \d+ of the step\), and not its ignore_index -100; step 3 reads it.*fix the data"):
        datacheck.check(job)


def test_a_clean_job_and_a_label_equal_to_ignore_index_pass(tmp_path):
    datacheck.check(_labelled(tmp_path / "clean"))
    job = _labelled(tmp_path / "ignored", first_read_at(3), -100)
    assert [(r.op, r.ignore) for r in datacheck.index_reads(job)][:1] == [("aten.nll_loss_forward.default", -100)]
    datacheck.check(job)


class NextToken(torch.nn.Module):
    """Embeds ids[:, :-1] and predicts ids[:, 1:]: both read through slices of the data."""

    def __init__(self):
        super().__init__()
        self.emb, self.fc = torch.nn.Embedding(20, 8), torch.nn.Linear(8, 20)

    def forward(self, ids):
        return torch.nn.functional.cross_entropy(self.fc(self.emb(ids[:, :-1])).reshape(-1, 20),
                                                 ids[:, 1:].reshape(-1))


def test_an_embedding_index_read_through_a_slice_is_named_with_its_element(tmp_path):
    """Column 0 is read by the embedding only (the labels are columns 1..): the scan follows
    the slice, so it names the embedding and the element."""
    ids = torch.randint(0, 20, (32, 5), generator=torch.Generator().manual_seed(4))
    row = first_read_at(2)
    ids[row, 0] = 20
    torch.manual_seed(0)
    job = load(write_program_job(tmp_path / "job", NextToken(), {"ids": ids}, ["ids"], steps=6, batch_size=4))
    with pytest.raises(datacheck.DataOutOfRange, match=rf"`ids` row {row} \(element 0 of the row\) holds 20, outside "
                                                       r"\[0, 20\) of aten.embedding.default .*step 2 reads it"):
        datacheck.check(job)


def test_verde_post_refuses_to_post_the_job_naming_the_row(embedded, tmp_path):
    row = first_read_at(3)
    job = _labelled(tmp_path, row, 7)
    v = Verde.deploy(embedded)
    with pytest.raises(datacheck.DataOutOfRange, match=rf"row {row} holds 7"):
        v.post(job, Context(job), 10**18, 10**18, client=embedded.accounts[1])
    assert not v.registry.events.JobPosted().get_logs(from_block=v.from_block)


class Picks(torch.nn.Module):
    """Reads data as indices and probabilities three more ways: x[arange, i] (aten.index.Tensor,
    negatives wrap), gather, and binary cross entropy's target."""

    def __init__(self, how):
        super().__init__()
        self.fc, self.how = torch.nn.Linear(4, 5), how

    def forward(self, x, i, p):
        z = self.fc(x)
        if self.how == "index":
            return z[torch.arange(z.shape[0]), i].sum()
        if self.how == "gather":
            return torch.gather(z, 1, i[:, None]).sum()
        return torch.nn.functional.binary_cross_entropy(torch.sigmoid(z[:, 0]), p)


@pytest.mark.parametrize("how,bad,good,said", [
    ("index", -6, -5, r"holds -6, outside \[-5, 5\) of aten.index.Tensor"),
    ("gather", 5, 4, r"holds 5, outside \[0, 5\) of aten.gather.default"),
    ("bce", 1.5, 1.0, r"holds 1.5, outside \[0, 1\] of aten.binary_cross_entropy.default")])
def test_index_gather_and_bce_reads_are_scanned_too(tmp_path, how, bad, good, said):
    """A value only step 2 reads: the index of x[arange, i] (in [-n, n): a negative one wraps),
    gather's (in [0, n)) and a binary cross entropy target (in [0, 1], as torch checks it)."""
    g = torch.Generator().manual_seed(5)
    data = {"x": torch.randn(32, 4, generator=g), "i": torch.randint(0, 5, (32,), generator=g),
            "p": torch.rand(32, generator=g)}
    row = first_read_at(2)
    for value, ok in ((good, True), (bad, False)):
        d = {k: v.clone() for k, v in data.items()}
        d["p" if how == "bce" else "i"][row] = value
        torch.manual_seed(0)
        job = load(write_program_job(tmp_path / f"{how}-{ok}", Picks(how), d, ["x", "i", "p"], steps=6, batch_size=4))
        if ok:
            datacheck.check(job)
        else:
            with pytest.raises(datacheck.DataOutOfRange, match=rf"`{'p' if how == 'bce' else 'i'}` row {row} {said}"
                                                               r" .*step 2 reads it"):
                datacheck.check(job)
