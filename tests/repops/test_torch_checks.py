"""torch's argument checks (repops/torch_checks.py) remember an accepted layout, never a
rejection: a step pays the meta run once, and what torch rejects stays rejected."""
import pytest
import torch

import repops
from repops import torch_checks
from repops.errors import UnsupportedOpError

aten = torch.ops.aten
NLL = aten.nll_loss_forward.default


def _nll_args(n=8, classes=10, target_n=None, transposed=False):
    x = torch.randn(classes, n).t() if transposed else torch.randn(n, classes)
    return (x, torch.randint(0, classes, (n if target_n is None else target_n,)), None, 1, -100)


@pytest.fixture
def meta_runs(monkeypatch):
    monkeypatch.setattr(torch_checks, "_PASSED", set())
    runs = []
    meta = torch_checks._meta
    monkeypatch.setattr(torch_checks, "_meta", lambda x: runs.append(1) or meta(x))
    return runs


def test_an_accepted_layout_is_checked_once_and_other_values_reuse_it(meta_runs):
    torch_checks.check(NLL, _nll_args())
    first = len(meta_runs)
    assert first > 0
    torch_checks.check(NLL, _nll_args())  # new values, same layout
    assert len(meta_runs) == first
    torch_checks.check(NLL, _nll_args(transposed=True))  # other strides: checked again
    assert len(meta_runs) > first


def test_a_rejection_is_never_remembered_and_a_new_shape_is_checked(meta_runs):
    torch_checks.check(NLL, _nll_args())
    for _ in range(2):  # the same op, a target of the wrong length: torch's error every time
        with pytest.raises(UnsupportedOpError, match="torch rejects"):
            torch_checks.check(NLL, _nll_args(target_n=7))
    torch_checks.check(NLL, _nll_args())


@pytest.mark.parametrize("a, b", [(0.0, -0.0), (1, True), (1, 1.0), ((1, 2), [1, 2])])
def test_arguments_equal_in_python_but_not_to_torch_get_keys_of_their_own(a, b):
    assert torch_checks._key(a) != torch_checks._key(b)


def test_keyword_arguments_are_part_of_the_key_and_an_opaque_one_has_none(meta_runs):
    with pytest.raises(torch_checks._NoKey):
        torch_checks._key(object())
    args = _nll_args()
    torch_checks.check(NLL, args)
    n = len(meta_runs)
    torch_checks.check(NLL, args[:4], {"ignore_index": -100})  # the same call spelled another way: its own key
    assert len(meta_runs) > n
    with pytest.raises(UnsupportedOpError, match="torch rejects"):
        torch_checks.check(NLL, args[:4], {"ignore_index": -100, "bogus": 1})


def test_cross_entropy_under_repops_still_refuses_what_torch_refuses_after_a_good_call():
    x, good, bad = torch.randn(8, 10), torch.randint(0, 10, (8,)), torch.randint(0, 10, (7,))
    with pytest.raises(Exception) as native:  # noqa: B017 - torch's own error, whatever its type
        torch.nn.functional.cross_entropy(x, bad)
    with repops.deterministic():
        torch.nn.functional.cross_entropy(x, good)
    with pytest.raises(type(native.value)):
        with repops.deterministic():
            torch.nn.functional.cross_entropy(x, bad)
