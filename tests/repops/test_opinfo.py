"""PyTorch's own test databases under RepOps (repops/conformance): every float32 OpInfo and
ModuleInfo gives native torch's result to rounding (forward and gradients, the same bits on 1
and 2 threads) or is refused with RepOps' own error, listed in the committed refusal table.
A WRONG result or a FOREIGN exception fails, and so does a refusal that is not listed (a new
refusal is visible: list it by regenerating with `python -m repops.conformance`, which runs
every sample; CI runs the first LIMIT)."""
import json
import warnings

import pytest
import torch

from repops.conformance import harness as H
from repops.conformance import report

LIMIT = 2
REFUSED = json.loads(report.REFUSED.read_text())
OPS = {H.opinfo_id(o): o for o in H.float32_opinfos()}
MODULES = {m.name: m for m in H.float32_moduleinfos()}


def _check(name, outcome):
    assert outcome.status in (H.PASS, H.REFUSED), f"{name}: {outcome.status}: {outcome.detail}"
    if outcome.status == H.REFUSED:
        assert name in REFUSED, (f"{name}: a refusal not in repops/conformance/refused.json ({outcome.detail}); "
                                 "if intended, regenerate it with `python -m repops.conformance`")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("name", sorted(OPS))
def test_opinfo_is_native_to_rounding_or_a_listed_refusal(name):
    _check(name, H.check_opinfo(OPS[name], LIMIT)[0])


# ops whose reference inputs (extremal values) found wrong answers once: complex operands read as
# their real part (where, addcmul, addcdiv), p = 0 distances ignoring NaN (cdist), plus the
# transcendentals and reductions reworked since (grid_sample's 5 minutes of reference inputs are
# left to the full run: tests/repops/test_grid_quantile.py has its inf and NaN pixels)
EDGE_OPS = ["where", "addcmul", "addcdiv", "cdist", "sin", "cos", "tan", "pow", "var", "std", "add", "sub",
            "nn.functional.interpolate.bilinear"]


@pytest.mark.parametrize("name", EDGE_OPS)
def test_reference_inputs_of_the_edge_ops_are_native_to_rounding_or_refused(name):
    """`python -m repops.conformance --reference-inputs` runs every OpInfo so (minutes)."""
    outcome, ran = H.check_opinfo(OPS[name], 40, thread_check=False, reference=True)
    assert ran and outcome.status in (H.PASS, H.REFUSED), f"{name}: {outcome.status}: {outcome.detail}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_moduleinfo_is_native_to_rounding_or_a_listed_refusal(name):
    _check(name, H.check_moduleinfo(MODULES[name], LIMIT)[0])


def test_a_wrong_answer_is_classified_wrong():
    """The harness itself: a definition that returns another value is WRONG, one that raises
    a foreign exception FOREIGN, RepOps' error a refusal."""
    from repops import aten as A
    from repops.errors import UnsupportedOpError
    op = OPS["exp"]
    from torch.testing._internal.opinfo.core import SampleInput
    sample = SampleInput(torch.randn(3, 4))
    native = A.REGISTRY[torch.ops.aten.exp.default]
    for impl, status in ((lambda a: native(a) + 1, H.WRONG), (lambda a: native(a).reshape(-1), H.WRONG),
                         (lambda a: 1 / 0, H.FOREIGN), (lambda a: (_ for _ in ()).throw(UnsupportedOpError("no")),
                                                        H.REFUSED)):
        A.REGISTRY[torch.ops.aten.exp.default] = impl
        try:
            assert H.check_sample(op, sample, backward=False).status == status
        finally:
            A.REGISTRY[torch.ops.aten.exp.default] = native


def test_core_aten_lists_every_core_overload():
    core = report.core_aten()
    assert len(core) >= 180 and all(torch.Tag.core in op.tags for op in core)
    assert not any(str(op).startswith("aten.sym_") for op in core)
