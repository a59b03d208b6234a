"""Level 2: the operator nodes of the disputed step s (paper Phase 2).

Both parties open their claim C_{s+1} into (S, R) (it must hash to what they said at level
1) and, unless s = 0, the agreed C_s into the state before. Then:
- same trace R, different state S: a checkpoint tensor differs from what the trace
  produced: the first differing state tensor is checked against its producer (the graph
  says which node and slot, or the unchanged state tensor before the step);
- different traces: Merkle descent to the first differing node j, then
  Case 1: its structure is not the graph's;
  Case 2: an input commitment is not its source's (the producing node's output, the
          state before the step, or the step's batch);
  Case 3: same inputs, different outputs (or a fault where the other has outputs): level 3
          on that operator.
A fault claim (docs/PROTOCOL.md §6) opens into the fault state of step s and a trace whose
last node faults, ZERO after it. Two rules only it needs: a party whose trace is ZERO at the
first differing node, or whose fault claim shares its trace with the other's claim, shows its
fault node (proven in its trace, before that node): the other party agreed with a trace that
faults there and went on, and loses; a party that cannot show one loses.
Starts from level 1's StepFound; hands level 3 a NodeFound.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..protocol import merkle
from ..protocol.claims import fault_state, step_claim
from ..protocol.dataset import state_tree
from ..protocol.trace import DATA, FAULT_NODE, NODE_OUT, STATE, DecodeError, decode_node, decode_structure
from .engine import descend
from .level1_steps import StepFound
from .party import Lost, Party

LEVEL = 2


@dataclass
class NodeFound:
    """Case 3 at node j of step s: agreed structure and inputs, different outputs."""
    step: int
    node: int
    structure: bytes
    inputs: list          # agreed input commitments
    outputs: dict         # party name -> its output commitments, or (kernel, element) of its fault
    roots: dict           # party name -> its trace root R


def _open(p: Party, point: int, claim: bytes) -> tuple[bytes, bytes]:
    got = p.ask(LEVEL, "open_claim", point)
    if not isinstance(got, (list, tuple)) or len(got) != 2:
        raise Lost(p, LEVEL, "open_claim did not answer (state root, trace root)")
    S, R = (p.hash32(LEVEL, v, "root") for v in got)
    if step_claim(S, R) != claim:
        raise Lost(p, LEVEL, f"its opening of step claim {point} does not hash to the claim it made at level 1")
    return S, R


def _state_leaves(p: Party, point: int, root: bytes, n: int) -> list[bytes]:
    leaves = p.ask(LEVEL, "state_leaves", point)
    if not isinstance(leaves, (list, tuple)) or len(leaves) != n:
        raise Lost(p, LEVEL, f"state_leaves({point}) is not {n} commitments")
    leaves = [p.hash32(LEVEL, v, "state commitment") for v in leaves]
    if state_tree(leaves).root != root:
        raise Lost(p, LEVEL, f"its state commitments at {point} do not hash to the state root it opened")
    return leaves


def _node(p: Party, s: int, j: int, R: bytes, n: int) -> tuple[bytes, list, list]:
    """Node j of party p's trace, proven against its root R."""
    got = p.ask(LEVEL, "node", s, j)
    try:
        enc, proof = got
        proof = [p.hash32(LEVEL, x, "proof") for x in proof]
        if not merkle.verify(R, n, j, merkle.leaf_hash(enc), proof):
            raise Lost(p, LEVEL, f"node {j}'s Merkle proof does not verify against its trace root")
        return decode_node(enc)
    except (TypeError, ValueError, DecodeError) as e:
        if isinstance(e, Lost):
            raise
        raise Lost(p, LEVEL, f"node {j} is malformed: {e}") from None


def _fault_shown(x: Party, other: Party, s: int, R: bytes, n: int, before: int) -> list[Party]:
    """x shows the node where its run of step s faults, proven in its trace R at an index
    before `before`: then the other agreed with a trace that faults there and went on (it
    loses); else x loses."""
    got = x.ask(LEVEL, "fault_node", s)
    try:
        i, enc, proof = got
        i, enc, proof = int(i), bytes(enc), [x.hash32(LEVEL, p, "proof") for p in proof]
        ok = (0 <= i < before and enc[:1] == FAULT_NODE and merkle.verify(R, n, i, merkle.leaf_hash(enc), proof)
              and isinstance(decode_node(enc)[2], tuple))
    except (TypeError, ValueError, DecodeError):
        ok = False
    if not ok:
        x.reason = f"its trace of step {s} has no node where it faults before node {before}, as its claim says"
        return [x]
    other.reason = f"it agreed with a trace of step {s} that faults at node {i}, and went on from there"
    return [other]


def _fault_before(state_root: bytes, s: int) -> int | None:
    """The step t < s whose fault state (claims.fault_state) `state_root` is, or None."""
    return next((t for t in range(s) if fault_state(t) == state_root), None)


def play(ctx, a: Party, b: Party, found: StepFound) -> list[Party] | NodeFound:
    """-> the losers (a list), or the Case 3 operator dispute to go on with."""
    s, claims = found.step, found.claims
    p = s + 1
    (Sa, Ra), (Sb, Rb) = (_open(x, p, claims[x.name][p]) for x in (a, b))
    n_state = len(ctx.initial_leaves)
    if s == 0:
        before = ctx.initial_leaves
    else:
        S0 = _open(a, s, claims[a.name][s])[0]
        _open(b, s, claims[b.name][s])
        before = None  # fetched when needed
    n = len(ctx.graph.structures)

    def state_before():
        return before if before is not None else _state_leaves(a, s, S0, n_state)

    if s and (t := _fault_before(S0, s)) is not None:
        # the agreed C_s is a fault claim (the run faulted at step t < s): a fault claim holds at
        # every later point, so only a claim that repeats it is one (a cheater may agree with an
        # honest fault claim for a while, then claim a result, or a fault, on the same trace)
        losers = [x for x in (a, b) if claims[x.name][p] != claims[x.name][s]]
        for x in losers:
            x.reason = f"it claims a state after step {s} where the run it agreed with had faulted at step {t}"
        return losers

    if Ra == Rb:
        for x, S, other in ((a, Sa, b), (b, Sb, a)):
            if S == fault_state(s):  # a fault claim: the same trace with a state after it is no claim
                return _fault_shown(x, other, s, Ra, n, n)
        la, lb = _state_leaves(a, p, Sa, n_state), _state_leaves(b, p, Sb, n_state)
        i = next(k for k in range(n_state) if la[k] != lb[k])
        ref = ctx.graph.state_refs[i]
        if ref.kind == NODE_OUT:
            _, _, outs = _node(a, s, ref.index, Ra, n)
            if not isinstance(outs, list) or ref.slot >= len(outs):
                raise Lost(a, LEVEL, f"node {ref.index} has no output slot {ref.slot}")
            truth = outs[ref.slot]
        else:
            truth = state_before()[ref.index]
        losers = [x for x, leaves in ((a, la), (b, lb)) if leaves[i] != truth]
        for x in losers:
            x.reason = f"state tensor {i} after step {s} is not the output of its producer in the trace"
        return losers

    j, leaves = descend(LEVEL, a, b, n, (Ra, Rb), "trace_node", s)
    if j >= n:  # past the graph's last node: only padding (ZERO) may be there
        return [x for x, leaf in zip((a, b), leaves) if leaf != merkle.ZERO]
    for x, leaf, other, R in ((a, leaves[0], b, Ra), (b, leaves[1], a, Rb)):
        if leaf == merkle.ZERO:  # no node there: its run faulted before (the other agreed with that node)
            return _fault_shown(x, other, s, R, n, j)
    expected = ctx.graph.structures[j]
    _, _, refs = decode_structure(expected)
    decoded = {}
    for x, R in ((a, Ra), (b, Rb)):
        sh, ins, outs = _node(x, s, j, R, n)
        decoded[x.name] = (sh, ins, outs)
    # Case 1: the structure (op, attributes, wiring) must be the graph's
    losers = [x for x in (a, b) if decoded[x.name][0] != merkle.sha256(expected)]
    for x in losers:
        x.reason = f"node {j} of step {s} is not the job's graph there (Case 1)"
    if losers:
        return losers
    # Case 2: each input must be its source's commitment
    for x in (a, b):
        if len(decoded[x.name][1]) != len(refs):
            x.reason = f"node {j} has {len(decoded[x.name][1])} inputs, its structure {len(refs)}"
            return [x]
    ins_a, ins_b = decoded[a.name][1], decoded[b.name][1]
    for i, ref in enumerate(refs):
        if ins_a[i] == ins_b[i]:
            continue
        if ref.kind == NODE_OUT:
            _, _, outs = _node(a, s, ref.index, Ra, n)  # nodes before j are the same in both traces
            truth = outs[ref.slot] if isinstance(outs, list) and ref.slot < len(outs) else None
        elif ref.kind == STATE:
            truth = state_before()[ref.index]
        elif ref.kind == DATA:
            truth = ctx.batch_commitments(s)[ref.index]
        else:
            truth = None
        losers = [x for x, ins in ((a, ins_a), (b, ins_b)) if ins[i] != truth]
        for x in losers:
            x.reason = f"input {i} of node {j} of step {s} is not what its source holds (Case 2)"
        return losers
    return NodeFound(s, j, expected, ins_a, {a.name: decoded[a.name][2], b.name: decoded[b.name][2]},
                 {a.name: Ra, b.name: Rb})
