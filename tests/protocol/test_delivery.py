"""Result delivery: what the accepted trainer publishes is what the client gets, checked
against the accepted claim; a damaged or substituted store entry is refused, naming what
differs (issue #22)."""
import json

import pytest
import torch

from offchain.protocol.dataset import initial_state
from offchain.protocol.delivery import DeliveryError, MANIFEST, STATE, model_tensors, publish, verify


def test_the_published_result_verifies_and_loads_bit_for_bit(job, honest, tmp_path):
    entry = publish(honest, tmp_path / "store")
    assert entry.name == honest.final_claim().hex()
    state = verify(job, tmp_path / "store", honest.final_claim())
    final = honest.store.load(job.spec.steps)
    assert state.keys() == final.keys()
    for n in final:
        assert torch.equal(state[n].view(torch.int32), final[n].view(torch.int32)), n  # bits, not values
    model = initial_state(job).model
    model.load_state_dict(model_tensors(state), strict=True)  # what a client does with it
    assert publish(honest, tmp_path / "store") == entry  # idempotent


@pytest.mark.parametrize("damage,message", [
    ("flip", "does not match its commitment"),
    ("truncate", "is damaged"),
    ("manifest-commitment", "do not hash to the accepted claim"),
    ("manifest-names", "not this job's state"),
    ("missing", "no result"),
])
def test_a_damaged_or_substituted_entry_is_refused(job, honest, tmp_path, damage, message):
    store = tmp_path / "store"
    entry = publish(honest, store)
    claim = honest.final_claim()
    if damage == "flip":
        from safetensors.torch import load_file, save_file
        t = load_file(str(entry / STATE))
        name = next(iter(t))
        t[name] = t[name].clone()
        t[name].view(-1)[0] = torch.nextafter(t[name].view(-1)[0], torch.tensor(1e9))  # one ulp, one element
        save_file(t, str(entry / STATE))
    elif damage == "truncate":
        data = (entry / STATE).read_bytes()
        (entry / STATE).write_bytes(data[:-64])
    elif damage.startswith("manifest"):
        m = json.loads((entry / MANIFEST).read_text())
        if damage == "manifest-commitment":
            m["commitments"][0] = "00" * 32
        else:
            m["names"] = m["names"][::-1]
        (entry / MANIFEST).write_text(json.dumps(m))
    else:
        claim = bytes(32)
    with pytest.raises(DeliveryError, match=message):
        verify(job, store, claim)
