"""The small jobs the protocol and on-chain tests (and benchmarks/contracts_gas.py) play on
(one definition each): the MLP job, a program job whose model drops, one that computes
integers from its batch, one whose labels no on-chain kernel computes (an integer product), and a program
classifier whose data the tests make bad at a chosen row."""
import torch

from offchain.protocol.dataset import write_job, write_program_job
from offchain.protocol.schedule import batch_rows
from offchain.trainer import adversaries as A

STEPS, FANOUT = 6, 3

# one of every dishonest behaviour on the MLP job, each with the level its dispute must end at
# (the CPU's disputes in test_dispute.py, the GPU's in tests/cuda/test_dispute_gpu.py)
ADVERSARIES = [
    A.Lazy(start=3), A.StopsEarly(steps_done=2), A.PoisonedData(step=3), A.WrongHyperParameter(),
    A.CorruptValue(step=2, node=9), A.NativeKernel(step=2), A.TamperedInput(step=2), A.ExtraOp(step=STEPS - 1),
    A.InconsistentOpening(), A.BadMerkleProof(step=2, node=9),
    A.ForgedCheckpoint(step=2), A.Silent(answers=3), A.CorruptValue(step=STEPS - 1, node=40),
    A.KernelCheat(step=2, element=5), A.KernelCheat(step=3, element=5, from_end=2, after_commit=True),
    A.LyingDecomposition(step=2, node=9), A.InPlaceResultLiar(step=2),
    A.ReChunked(step=2, node=9),  # issue #18: the same values under another chunk size
]


def mlp_data(n=64, d=16, classes=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    return {"x": x, "y": (x @ torch.randn(d, classes, generator=g)).argmax(1)}


def write_small_job(directory):
    return write_job(directory, "mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, mlp_data(), steps=STEPS,
                     batch_size=8, fanout=FANOUT, chunk=64)


class DropoutNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.f = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Dropout(0.25),
                                     torch.nn.Linear(32, 5))

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.f(x), y)


def write_dropout_job(directory):
    """A program job with nn.Dropout: 4 steps of 8 rows, its masks keyed by seed 11."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = {"x": torch.randn(32, 12, generator=g), "y": torch.randint(0, 5, (32,), generator=g)}
    return write_program_job(directory, DropoutNet(), data, ["x", "y"], steps=4, batch_size=8, seed=11, fanout=2,
                             chunk=64)


class TokenBag(torch.nn.Module):
    """What models do with token ids in forward: a padding mask (ids != 0), its count per row,
    a float cast of it, and labels from the ids (a rule, % classes): integers from the batch."""

    def __init__(self):
        super().__init__()
        self.emb, self.fc = torch.nn.Embedding(20, 8), torch.nn.Linear(8, 3)

    def forward(self, ids):
        mask = ids != 0
        count = mask.sum(1, keepdim=True)
        h = (self.emb(ids) * mask[..., None].float()).sum(1) / count.float()
        return torch.nn.functional.cross_entropy(self.fc(h), (ids[:, 0] + ids[:, -1]) % 3)


def write_integer_job(directory):
    """A program job computing integers from its batch: 4 steps of 6 rows of 7 token ids
    (0 pads; every row has a token)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 20, (24, 7), generator=g)
    ids[:, 0] = torch.randint(1, 20, (24,), generator=g)
    ids[::3, -2:] = 0
    return write_program_job(directory, TokenBag(), {"ids": ids}, ["ids"], steps=4, batch_size=6, fanout=2, chunk=16)


class IdProduct(torch.nn.Module):
    """The label: the product of the row's token ids, mod 8 (a product of integers: an op with
    no integer kernels; argmax and the sort of integers have them now)."""

    def __init__(self):
        super().__init__()
        self.emb, self.fc = torch.nn.Embedding(20, 4), torch.nn.Linear(4, 8)

    def forward(self, ids):
        return torch.nn.functional.cross_entropy(self.fc(self.emb(ids).mean(1)), ids.prod(1) % 8)


def write_unsettled_integer_job(directory):
    """A program job whose step has a node the chain cannot settle (aten.prod of integers)."""
    torch.manual_seed(0)
    ids = torch.randint(0, 20, (4, 8), generator=torch.Generator().manual_seed(0))
    return write_program_job(directory, IdProduct(), {"ids": ids}, ["ids"], steps=2, batch_size=2)


class Classifier(torch.nn.Module):
    def __init__(self, classes: int = 5):
        super().__init__()
        self.f = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, classes))

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.f(x), y)


CLASSIFIER = dict(rows=32, batch_size=4, steps=6, classes=5)


def classifier_data(seed: int = 3) -> dict:
    g = torch.Generator().manual_seed(seed)
    n, c = CLASSIFIER["rows"], CLASSIFIER["classes"]
    return {"x": torch.randn(n, 6, generator=g), "y": torch.randint(0, c, (n,), generator=g)}


def write_classifier_job(directory, data: dict):
    """A program MLP with cross_entropy over 5 classes on `data` (classifier_data, maybe made
    bad): 6 steps of 4 rows, seed 0."""
    torch.manual_seed(0)
    return write_program_job(directory, Classifier(CLASSIFIER["classes"]), data, ["x", "y"],
                             steps=CLASSIFIER["steps"], batch_size=CLASSIFIER["batch_size"], fanout=2, chunk=64)


def first_read_at(step: int, rows: int = CLASSIFIER["rows"], batch_size: int = CLASSIFIER["batch_size"],
                  seed: int = 0) -> int:
    """A row that step `step` reads and no earlier step does (one past batch 0's rows)."""
    earlier = {r for t in range(step) for r in batch_rows(rows, batch_size, seed, t)}
    return next(r for r in batch_rows(rows, batch_size, seed, step) if r not in earlier and r >= batch_size)


def write_fault_job(directory, step: int = 3):
    """The classifier job whose data holds an out-of-range label (5, of classes 0..4) in a row
    that step `step` reads first: the run faults at that step (rule `index` of nll_loss), and
    every honest trainer ends with the same fault claim."""
    data = classifier_data()
    data["y"][first_read_at(step)] = CLASSIFIER["classes"]
    return write_classifier_job(directory, data)


class Ratio(torch.nn.Module):
    """Labels computed in forward from the ids: (first // second) % 3. An integer division the
    data scan cannot see (offchain/protocol/datacheck.py follows index inputs, not arithmetic)."""

    def __init__(self):
        super().__init__()
        self.emb, self.fc = torch.nn.Embedding(20, 8), torch.nn.Linear(8, 3)

    def forward(self, ids):
        return torch.nn.functional.cross_entropy(self.fc(self.emb(ids).mean(1)), (ids[:, 0] // ids[:, 1]) % 3)


def write_division_fault_job(directory, step: int = 3):
    """A program job whose labels divide two ids; a row that step `step` reads first has a 0
    divisor: the run faults there (rule `division`), 6 steps of 4 rows of 5 ids."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(1, 20, (32, 5), generator=g)
    ids[first_read_at(step), 1] = 0
    return write_program_job(directory, Ratio(), {"ids": ids}, ["ids"], steps=6, batch_size=4, fanout=2, chunk=64)
