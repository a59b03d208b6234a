// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Bisection, Clock} from "./lib/Bisection.sol";
import {Rounds} from "./lib/Rounds.sol";
import {Merkle} from "./lib/Merkle.sol";
import {Nodes} from "./lib/Nodes.sol";
import {JobRegistry} from "./JobRegistry.sol";

interface IOperatorGame {
    function start(uint256 id, address[2] calldata party, uint256 job, uint256 node, uint64[2] calldata left,
                   uint96[2] calldata faults) external;
}

/// @title The dispute game on chain (docs/PROTOCOL.md §7), the same levels as the off-chain
/// referee (offchain/dispute). Implemented: level 1 (N-ary rounds over the step claims) and
/// level 2 (opening; Merkle descent over the traces, or over the states when the traces
/// agree, then the state map;
/// Case 1 against the graph root, Case 2 against the producing node / the state before /
/// the step's batch), with chess clocks and timeouts; a decided match goes to the registry
/// (JobRegistry.decide). Case 3 goes on in OperatorGame (levels 3-5), which hands the
/// decision back (decideOperator); meanwhile the match waits here in phase Operator.
/// A fault claim (docs/PROTOCOL.md §6) opens like any claim, into H(0x0A || u32 step) and a
/// trace whose last node is a fault node, ZERO after it: its party shows that node (showFault)
/// when its trace has nothing at the first differing node, or when the other claim has the
/// same trace; the other agreed with a trace that faults and went on, and loses.
/// @dev Party 0 and party 1 move in the same rounds: each posts its answer, the round
/// closes when both have. Only the two parties move; every move is checked against the
/// phase, the party's clock and what it said before.
contract DisputeGame {
    using Bisection for Bisection.Nary;
    using Bisection for Bisection.Descent;
    using Clock for Clock.Clocks;
    using Rounds for Rounds.Round;

    enum Phase {
        None,
        Steps, // level 1
        Open, // level 2 starts: open C_{s+1} and C_s
        StateLeaf, // same trace, different states (after a descent over S): reveal the commitment
        StateSource, // prove the producer of the first differing state tensor
        Tops, // different traces: reveal the trace tree's top
        Descent, // Merkle descent over the traces
        Node, // reveal the first differing node
        InputSource, // prove the source of the first differing input (Case 2)
        Operator, // Case 3: levels 3-5, played in OperatorGame
        FaultNode, // same trace, one a fault claim: its party shows the node where the step faults
        Done
    }

    struct Match {
        Phase phase;
        uint64 job; // (one slot with the phase: every move reads both)
        Rounds.Round round; // the parties, their moves this round, their clocks
        Bisection.Nary nary;
        // level 1: the claim both made at nary.lo, each party's at nary.hi; written only once
        // the interval moves (until then they are the job's C_0 and the revealed claims, read
        // from the registry: opening a match stores three slots fewer)
        bytes32 loClaim;
        bytes32[2] hiClaim;
        bytes32[2] stateRoot; // S_{s+1} opened by each
        bytes32[2] traceRoot; // R_{s+1}
        bytes32 stateBefore; // S_s (agreed)
        Bisection.Descent desc;
        bytes32[2] claimsHash; // level 1: the first poster's claims this round, hashed
        uint256 pick; // the disputed state tensor / node input
        bytes32[2] values; // each party's value there
        bool overState; // the descent runs over the state trees (else over the traces)
        uint8 refKind; // the disputed input's reference in the node's structure (Case 2)
        uint64 refIndex;
        uint64 refSlot;
    }

    event MatchOpened(uint256 indexed id, uint256 indexed job, address a, address b, uint256 steps, uint256 fanout);
    event StepRound(uint256 indexed id, uint256 lo, uint256 hi, uint256[] points);
    event StepFound(uint256 indexed id, uint256 step);
    event Opened(uint256 indexed id, bytes32[2] stateRoots, bytes32[2] traceRoots);
    event MatchDecided(uint256 indexed id, address indexed winner, address indexed loser, uint8 level, string reason);
    event NodeFound(uint256 indexed id, uint256 node);
    event ChildrenPosted(uint256 indexed id, uint256 party, bytes32[] nodes);
    event ClaimsPosted(uint256 indexed id, uint256 party, bytes32[] claims);
    event NodePosted(uint256 indexed id, uint256 party, bytes node);
    event Disagreement(uint256 indexed id, uint256 index, bool stateTensor);
    event OperatorDisputed(uint256 indexed id, uint256 step, uint256 node);
    event MatchDrawn(uint256 indexed id, address a, address b, uint8 level);

    error RegistryAlreadySet();
    error NotDeployer(address caller);
    error NotDisputed(uint256 job);
    error WrongPhase(uint256 id, Phase phase);
    error NobodyTimedOut(uint256 id);
    error WrongLength(uint256 got, uint256 want);
    error SourceNotProven();
    error NeitherMatches();
    error PlayedInOperatorGame(uint256 id);
    error AlreadyOpen(uint256 id);
    error NotOperatorGame(address caller);
    error NotRequested(uint256 job, address a, address b);
    /// @notice The nodes passed as the other party's are not what it posted this round.
    error OtherChildrenWrong(uint256 id);
    /// @notice The claims passed as the other party's are not what it posted this round.
    error OtherClaimsWrong(uint256 id);
    /// @notice The node passed as the other party's is not what it posted this round.
    error OtherNodeWrong(uint256 id);
    /// @notice Only a party with nothing at the first differing node (or whose fault claim
    /// shares the other's trace) shows a fault.
    error NotYourFault(uint256 id);
    /// @notice The node is not a fault node of the party's trace before the disputed one.
    error FaultNotShown(uint256 id);

    uint256 internal constant DRAW = 2; // a decision's winner when both parties lose
    uint256 internal constant VOID = 3; // ... when the job cannot be settled on chain there
    /// @dev The largest node a party may reveal: the second to post passes the first's back, so
    /// two of them and a structure stay one move a real chain takes (a node's output count is not
    /// in the job's graph: a cheater posting first could pad it past that). Every honest agent
    /// refuses a job with a larger node (offchain/chain/verde.py check_settleable).
    uint256 internal constant MAX_NODE = 40_000;
    JobRegistry public registry;
    IOperatorGame public operators;
    address internal immutable deployer;
    uint256 public nextId = 1;
    mapping(uint256 => Match) internal matches;
    /// @dev H(job, lower address, higher address) -> its match
    mapping(bytes32 => uint256) public matchOf;
    mapping(uint256 => bytes32[][2]) internal pending;

    constructor() {
        deployer = msg.sender;
    }

    /// @notice Wire the registry and the levels 3-5 game, once, by the deployer.
    function setUp(JobRegistry r, IOperatorGame o) external {
        if (msg.sender != deployer) revert NotDeployer(msg.sender);
        if (address(registry) != address(0)) revert RegistryAlreadySet();
        registry = r;
        operators = o;
    }

    /// @notice The disputed node's leaf in each party's trace, once a match reaches levels 3-5
    /// (same inputs, different outputs): levels 3-5 take a party's node in calldata and check
    /// it against these (nothing of the node is stored twice).
    function nodeLeaves(uint256 id) external view returns (bytes32[2] memory) {
        Match storage m = matches[id];
        if (m.phase != Phase.Operator) revert WrongPhase(id, m.phase);
        return [m.desc.a, m.desc.b];
    }

    /// @notice OperatorGame's decision on a match it was handed (winner: a seat, or DRAW).
    function decideOperator(uint256 id, uint256 winner, uint8 level, string calldata reason) external {
        if (msg.sender != address(operators)) revert NotOperatorGame(msg.sender);
        Match storage m = matches[id];
        if (m.phase != Phase.Operator) revert WrongPhase(id, m.phase);
        _decide(id, m, winner, level, reason);
    }

    function state(uint256 id)
        external
        view
        returns (Phase phase, uint256 lo, uint256 hi, uint64[2] memory clockLeft, uint8 waiting)
    {
        Match storage m = matches[id];
        return (m.phase, m.nary.lo, m.nary.hi, m.round.clock.remaining(), m.round.clock.waiting);
    }

    /// @notice The descent's current height and index (at the disputed node: 0, its index).
    function descent(uint256 id) external view returns (uint256 height, uint256 index) {
        return (matches[id].desc.height, matches[id].desc.index);
    }

    /// @notice Whether the descent runs over the state trees (the traces agreed).
    function overState(uint256 id) external view returns (bool) {
        return matches[id].overState;
    }

    /// @notice The disputed state tensor or node input.
    function pick(uint256 id) external view returns (uint256) {
        return matches[id].pick;
    }

    function parties(uint256 id) external view returns (address[2] memory) {
        return matches[id].round.party;
    }

    /// @notice The points both parties must answer in the current step round.
    function roundPoints(uint256 id) public view returns (uint256[] memory) {
        Match storage m = matches[id];
        return Bisection.points(m.nary.lo, m.nary.hi, m.nary.n);
    }

    /// @notice Open the match the registry asks for (JobRegistry.requested). Anyone may: a
    /// trainer outside the pair opens it to keep its job moving when the pair will not. The
    /// lower address sits in seat 0, whoever opens.
    function open(uint256 job, address a, address b) external returns (uint256 id) {
        (JobRegistry.Status status, address[2] memory req, uint256 steps, uint256 fanout, uint256 clock) =
            registry.opening(job);
        if (status != JobRegistry.Status.Disputed) revert NotDisputed(job);
        if (a > b) (a, b) = (b, a);
        if (a != req[0] || b != req[1]) revert NotRequested(job, a, b); // lower address first
        bytes32 pair = keccak256(abi.encode(job, a, b));
        if (matchOf[pair] != 0) revert AlreadyOpen(matchOf[pair]); // one match per pair: a second would be decided twice
        id = nextId++;
        matchOf[pair] = id;
        Match storage m = matches[id];
        m.job = uint64(job);
        m.round.party = [a, b];
        m.phase = Phase.Steps;
        m.nary = Bisection.Nary(0, uint64(steps), uint16(fanout));
        m.round.clock.init(uint64(clock));
        emit MatchOpened(id, job, a, b, steps, fanout);
        _nextRound(id, m);
    }

    function _move(uint256 id, Match storage m, Phase want) internal returns (uint256 i) {
        if (m.phase != want) revert WrongPhase(id, m.phase);
        i = m.round.move(id);
    }

    function _nextRound(uint256 id, Match storage m) internal {
        m.round.next();
        if (m.phase == Phase.Steps) {
            if (m.nary.done()) {
                m.phase = Phase.Open;
                emit StepFound(id, m.nary.lo);
            } else {
                emit StepRound(id, m.nary.lo, m.nary.hi, roundPoints(id));
            }
        }
    }

    /// @notice Level 1: this round's step claims, one per point of roundPoints(id). Only the
    /// claims at the interval's ends are kept: the first to post this round leaves the hash of
    /// its claims (and a `ClaimsPosted` event); the second passes them back as `theirs`.
    function postClaims(uint256 id, bytes32[] calldata claims, bytes32[] calldata theirs) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Steps);
        uint256 want = roundPoints(id).length;
        if (claims.length != want) revert Bisection.WrongPointCount(claims.length, want);
        if (!m.round.both()) {
            m.claimsHash[i] = keccak256(abi.encodePacked(claims));
            emit ClaimsPosted(id, i, claims);
            return;
        }
        if (keccak256(abi.encodePacked(theirs)) != m.claimsHash[1 - i]) revert OtherClaimsWrong(id);
        bytes32[] memory a = claims;
        bytes32[] memory b = theirs;
        if (i == 1) (a, b) = (b, a);
        uint256 k = m.nary.narrow(a, b);
        if (k > 0) m.loClaim = a[k - 1];
        if (k < a.length) m.hiClaim = [a[k], b[k]];
        _nextRound(id, m);
    }

    /// @dev The claims at the interval's ends (party i's at hi): until lo moves, C_0; until hi
    /// moves (a move writes two claims that differ, so never both zero), party i's revealed
    /// claim. Both read from the registry only then.
    function _ends(Match storage m, uint256 i) internal view returns (bytes32 lo, bytes32 hi) {
        lo = m.loClaim;
        if (m.nary.lo == 0) (lo,,,) = registry.anchor(m.job, JobRegistry.Root.Initial);
        hi = m.hiClaim[i];
        if (m.hiClaim[0] == 0 && m.hiClaim[1] == 0) (,,, hi) = registry.seats(m.job, m.round.party[i]);
    }

    function _claim(bytes32 s, bytes32 r) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x06), s, r));
    }

    /// @notice Level 2 begins: open the disputed claim C_{s+1} into (S, R) and the agreed
    /// C_s into (S_s, R_s) (ignored for s = 0: C_0 is the job's). A party whose opening
    /// does not hash to what it claimed at level 1 loses at once.
    function openStep(uint256 id, bytes32 s1, bytes32 r1, bytes32 s0, bytes32 r0) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Open);
        (bytes32 lo, bytes32 hi) = _ends(m, i);
        if (_claim(s1, r1) != hi) { // hi = lo + 1 now
            return _decide(id, m, 1 - i, 2, "its opening of the disputed step claim does not hash to its level-1 claim");
        }
        if (_claim(s0, r0) != lo) {
            return _decide(id, m, 1 - i, 2, "its opening of the agreed step claim does not hash to it");
        }
        m.stateRoot[i] = s1;
        m.traceRoot[i] = r1;
        m.stateBefore = s0; // both openings hash to the same agreed claim
        if (!m.round.both()) return;
        emit Opened(id, m.stateRoot, m.traceRoot);
        if (m.traceRoot[0] == m.traceRoot[1]) {
            bytes32 faulted = sha256(abi.encodePacked(bytes1(0x0a), uint32(m.nary.lo)));
            if (m.stateRoot[0] == faulted || m.stateRoot[1] == faulted) { // a fault claim; the other has its trace
                m.pick = m.stateRoot[0] == faulted ? 0 : 1;
                (bytes32 agreed, bytes32 repeated) = _ends(m, 1 - m.pick);
                if (repeated == agreed) { // a trace that faults after an agreed claim that is not one: none
                    return _decide(id, m, 1 - m.pick, 2, "it claims a fault at a step after the fault it agreed with");
                }
                m.phase = Phase.FaultNode;
                m.round.clock.await_(uint8(1 << m.pick));
                return;
            }
        }
        m.overState = m.traceRoot[0] == m.traceRoot[1]; // same trace: a checkpoint tensor differs
        m.phase = Phase.Tops;
        _nextRound(id, m);
    }

    // -- same trace, different states: the state map ------------------------------------------
    /// @notice After the descent over the state trees: reveal your commitment of the first
    /// differing state tensor (it must hash to your leaf).
    function postStateLeaf(uint256 id, bytes32 commitment) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.StateLeaf);
        if (Merkle.leaf(abi.encodePacked(commitment)) != (i == 0 ? m.desc.a : m.desc.b)) {
            return _decide(id, m, 1 - i, 2, "its state commitment does not hash to its leaf");
        }
        m.values[i] = commitment;
        if (!m.round.both()) return;
        m.pick = m.desc.index;
        m.phase = Phase.StateSource;
        emit Disagreement(id, m.pick, true);
        _nextRound(id, m);
    }

    /// @notice Prove where the disputed state tensor comes from: its 7-byte reference in the
    /// job's state map, then that source (a node of the agreed trace, or the state before).
    function resolveState(
        uint256 id,
        bytes calldata ref,
        bytes32[] calldata refProof,
        bytes calldata source,
        bytes32[] calldata sourceProof
    ) external {
        Match storage m = matches[id];
        if (m.phase != Phase.StateSource) revert WrongPhase(id, m.phase);
        m.round.seat(id, msg.sender);
        _judge(id, m, _source(m, _stateRef(m, ref, refProof), source, sourceProof), "state tensor");
    }

    /// @dev The disputed state tensor's producer, proven in the job's state map.
    function _stateRef(Match storage m, bytes calldata ref, bytes32[] calldata proof) internal view returns (Ref memory r) {
        (bytes32 root,, uint256 count,) = registry.anchor(m.job, JobRegistry.Root.StateMap);
        if (!Merkle.verify(root, count, m.pick, Merkle.leaf(ref), proof)) revert SourceNotProven();
        (r.kind, r.index, r.slot) = Nodes.parseRef(ref);
        r.before = type(uint256).max;
    }

    // -- Merkle descent to the first differing node (or state tensor) ------------------------
    function _leafCount(Match storage m) internal view returns (uint256) {
        (, uint256 graphNodes, uint256 stateCount,) = registry.anchor(m.job, JobRegistry.Root.None);
        return m.overState ? stateCount : graphNodes;
    }

    function _root(Match storage m, uint256 i) internal view returns (bytes32) {
        return m.overState ? m.stateRoot[i] : m.traceRoot[i];
    }

    /// @notice Reveal the top of your trace tree (or state tree, when the traces agree). It
    /// goes straight into the descent's node for your seat.
    function postTop(uint256 id, bytes32 top) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Tops);
        uint256 n = _leafCount(m);
        if (Merkle.seal(n, top) != _root(m, i)) {
            return _decide(id, m, 1 - i, 2, m.overState ? "its state root does not seal the job's number of state tensors"
                : "its trace root does not seal the graph's number of nodes");
        }
        if (i == 0) m.desc.a = top;
        else m.desc.b = top;
        if (!m.round.both()) return;
        m.desc.start(n, _root(m, 0), m.desc.a, _root(m, 1), m.desc.b);
        m.phase = m.desc.atLeaf() ? _atLeaf(id, m) : Phase.Descent;
        _nextRound(id, m);
    }

    function _atLeaf(uint256 id, Match storage m) internal returns (Phase) {
        emit NodeFound(id, m.desc.index);
        return m.overState ? Phase.StateLeaf : Phase.Node;
    }

    /// @notice Descend: the nodes Bisection.width levels below your current node, in order
    /// (they must hash up to it). The first to post this round leaves an event; the second
    /// also passes the first's nodes, as that event holds them.
    function postChildren(uint256 id, bytes32[] calldata nodes, bytes32[] calldata theirs) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Descent);
        uint256 w = m.desc.width();
        if (nodes.length != w) revert Bisection.WrongNodeCount(nodes.length, w);
        if (Bisection.subtree(nodes) != (i == 0 ? m.desc.a : m.desc.b)) {
            return _decide(id, m, 1 - i, 2, "its children do not hash to its node");
        }
        if (!m.round.both()) {
            emit ChildrenPosted(id, i, nodes);
            return;
        }
        // theirs hash up to the other's node, as its own did when it posted them (checked
        // again rather than stored: seven hashes cost less than a storage slot)
        if (Bisection.subtree(theirs) != (i == 0 ? m.desc.b : m.desc.a)) revert OtherChildrenWrong(id);
        Bisection.Descent storage d = m.desc;
        if (i == 0) d.down(nodes, theirs);
        else d.down(theirs, nodes);
        if (d.atLeaf()) {
            if (d.index >= d.n) { // past the last leaf: only ZERO padding may be there
                return _decide(id, m, d.a == bytes32(0) ? 0 : 1, 2, "its tree has a leaf past the last");
            }
            m.phase = _atLeaf(id, m);
        }
        _nextRound(id, m);
    }

    /// @notice Reveal the first differing node: its encoding (hashing to your leaf), its
    /// structure, and the structure's proof in the job's graph (Case 1). The second to post
    /// also passes the first's encoding (from its NodePosted event).
    function postNode(uint256 id, bytes calldata enc, bytes calldata structure, bytes32[] calldata graphProof,
                      bytes calldata other) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Node);
        string memory bad = _checkNode(m, i, enc, structure, graphProof);
        if (bytes(bad).length != 0) return _decide(id, m, 1 - i, 2, bad);
        if (!m.round.both()) {
            emit NodePosted(id, i, enc);
            return;
        }
        // the first's node hashes to its leaf, as it did when posted (so it is well formed,
        // with the structure's input count): checked again rather than stored
        if (Merkle.leaf(other) != (i == 0 ? m.desc.b : m.desc.a)) revert OtherNodeWrong(id);
        (bytes memory a, bytes memory b) = i == 0 ? (enc, other) : (other, enc);
        _compareNodes(id, m, a, b, structure);
    }

    /// @notice Show the node where your run of the disputed step faults (a fault node, proven in
    /// your trace at `index`): in phase Node when your trace has nothing (ZERO) at the first
    /// differing node (the fault node comes before it), in phase FaultNode when your fault claim
    /// shares its trace with the other's claim. The other agreed with a trace that faults there
    /// and went on (or claims a state after it): it loses.
    function showFault(uint256 id, uint256 index, bytes calldata enc, bytes32[] calldata proof) external {
        Match storage m = matches[id];
        uint256 i = m.round.seat(id, msg.sender);
        (, uint256 n,,) = registry.anchor(m.job, JobRegistry.Root.None);
        uint256 before = n;
        if (m.phase == Phase.Node) {
            if ((i == 0 ? m.desc.a : m.desc.b) != bytes32(0)) revert NotYourFault(id);
            before = m.desc.index;
        } else if (m.phase != Phase.FaultNode || i != m.pick) {
            revert NotYourFault(id);
        }
        if (index >= before || Nodes.fault(enc) == 0 || !Merkle.verify(m.traceRoot[i], n, index, Merkle.leaf(enc), proof)) {
            revert FaultNotShown(id);
        }
        _decide(id, m, i, 2, "it agreed with a trace that faults, and went on from there");
    }

    /// @notice The agreed claim C_s before the disputed one is a fault claim: both parties'
    /// runs faulted at an earlier step `t` (its state root is H(0x0A || u32 t)). A fault claim
    /// holds at every later point, so the party whose disputed claim repeats C_s wins, and the
    /// other, which claims something after a fault it agreed with, loses. Without this rule a
    /// cheater could agree with an honest fault claim for a while and then claim a result on
    /// the same trace: the match went to the state trees, which a fault claim does not have.
    function showEarlierFault(uint256 id, uint32 t) external {
        Match storage m = matches[id];
        if (m.phase != Phase.Tops) revert WrongPhase(id, m.phase);
        uint256 i = m.round.seat(id, msg.sender);
        (bytes32 lo, bytes32 hi) = _ends(m, i);
        if (t >= m.nary.lo || m.stateBefore != sha256(abi.encodePacked(bytes1(0x0a), t)) || hi != lo) {
            revert FaultNotShown(id);
        }
        _decide(id, m, i, 2, "it claims a state after a fault it agreed with");
    }

    function _checkNode(Match storage m, uint256 i, bytes calldata enc, bytes calldata structure, bytes32[] calldata proof)
        internal
        view
        returns (string memory)
    {
        (bytes32 graphRoot, uint256 graphNodes,,) = registry.anchor(m.job, JobRegistry.Root.Graph);
        if (Merkle.leaf(enc) != (i == 0 ? m.desc.a : m.desc.b)) return "its node does not hash to its leaf";
        if (enc.length > MAX_NODE) return "its node is larger than a move may pass back";
        if (Nodes.structureHash(enc) != sha256(structure)) return "its structure is not its node's";
        if (Nodes.inputCount(enc) != Nodes.refCount(structure)) return "its node's inputs do not match its structure";
        if (!Merkle.verify(graphRoot, graphNodes, m.desc.index, Merkle.leaf(structure), proof)) {
            return "its node is not the job's graph there (Case 1)";
        }
        return "";
    }

    function _keepRef(Match storage m, bytes calldata structure, uint256 k) internal {
        (uint8 kind, uint256 index, uint256 slot) = Nodes.ref(structure, k);
        (m.refKind, m.refIndex, m.refSlot) = (kind, uint64(index), uint64(slot));
    }

    /// @dev Party A's node inputs against B's: the first that differs goes to Case 2, else
    /// Case 3 (OperatorGame). Both have the structure's input count.
    function _compareNodes(uint256 id, Match storage m, bytes memory a, bytes memory b, bytes calldata structure)
        internal
    {
        if (Nodes.inputsHash(a) != Nodes.inputsHash(b)) {
            uint256 k;
            while (Nodes.input(a, k) == Nodes.input(b, k)) ++k;
            m.pick = k;
            m.values = [Nodes.input(a, k), Nodes.input(b, k)];
            _keepRef(m, structure, k);
            m.phase = Phase.InputSource;
            emit Disagreement(id, k, false);
            return _nextRound(id, m);
        }
        m.phase = Phase.Operator;
        emit OperatorDisputed(id, m.nary.lo, m.desc.index);
        m.round.clock.await_(0);
        operators.start(id, m.round.party, m.job, m.desc.index, m.round.clock.remaining(), [Nodes.fault(a), Nodes.fault(b)]);
    }

    /// @notice Case 2: prove the source of the disputed input (the producing node's
    /// encoding and its proof in a trace root, the state tensor's commitment and its proof in
    /// the state before, or the step's batch commitments and their proof in the data root).
    function resolveInput(uint256 id, bytes calldata source, bytes32[] calldata sourceProof) external {
        Match storage m = matches[id];
        if (m.phase != Phase.InputSource) revert WrongPhase(id, m.phase);
        m.round.seat(id, msg.sender);
        Ref memory r = Ref(m.refKind, m.refIndex, m.refSlot, m.desc.index);
        _judge(id, m, _source(m, r, source, sourceProof), "input");
    }

    struct Ref {
        uint8 kind;
        uint256 index;
        uint256 slot;
        uint256 before; // a node source must come before this node
    }

    /// @dev The commitment a reference points at, from a proven source.
    function _source(Match storage m, Ref memory r, bytes calldata source, bytes32[] calldata proof)
        internal
        view
        returns (bytes32)
    {
        JobRegistry.Terms memory t = registry.terms(m.job); // dataRoot and steps too
        (uint8 kind, uint256 index) = (r.kind, r.index);
        if (kind == Nodes.NODE_OUT) {
            if (index >= r.before) revert SourceNotProven(); // an input comes from an earlier node
            bytes32 lf = Merkle.leaf(source);
            if (!Merkle.verify(m.traceRoot[0], t.graphNodes, index, lf, proof)
                && !Merkle.verify(m.traceRoot[1], t.graphNodes, index, lf, proof)) revert SourceNotProven();
            return Nodes.output(source, r.slot);
        }
        if (kind == Nodes.STATE) {
            if (source.length != 32) revert WrongLength(source.length, 32);
            if (!Merkle.verify(m.stateBefore, t.stateCount, index, Merkle.leaf(source), proof)) revert SourceNotProven();
            return bytes32(source);
        }
        if (kind == Nodes.DATA) {
            if (!Merkle.verify(t.dataRoot, t.steps, m.nary.lo, Merkle.leaf(source), proof)) revert SourceNotProven();
            if (source.length < 32 * (index + 1)) revert WrongLength(source.length, 32 * (index + 1));
            return bytes32(source[32 * index:32 * index + 32]);
        }
        revert SourceNotProven();
    }

    function _judge(uint256 id, Match storage m, bytes32 truth, string memory what) internal {
        if (m.values[0] == truth) return _decide(id, m, 0, 2, string.concat("its ", what, " is not what its source holds"));
        if (m.values[1] == truth) return _decide(id, m, 1, 2, string.concat("its ", what, " is not what its source holds"));
        revert NeitherMatches();
    }

    /// @notice Anyone may end a match whose waiting party let its clock run out.
    function timeout(uint256 id) external {
        Match storage m = matches[id];
        if (m.phase == Phase.None || m.phase == Phase.Done) revert WrongPhase(id, m.phase);
        if (m.phase == Phase.Operator) revert PlayedInOperatorGame(id);
        uint256 p = m.round.clock.expired();
        if (p == 2) revert NobodyTimedOut(id);
        _decide(id, m, p == 3 ? DRAW : 1 - p, uint8(m.phase == Phase.Steps ? 1 : 2), "its clock ran out");
    }

    /// @dev winner: the seat that won, DRAW (both ran out at the same instant: both are out) or
    /// VOID (the job has a node the chain cannot settle: both are out, their stakes returned).
    function _decide(uint256 id, Match storage m, uint256 winner, uint8 level, string memory reason) internal {
        m.phase = Phase.Done;
        (address a, address b) = (m.round.party[0], m.round.party[1]);
        if (winner == DRAW) {
            emit MatchDrawn(id, a, b, level);
            return registry.draw(m.job, a, b);
        }
        if (winner == VOID) {
            emit MatchDrawn(id, a, b, level);
            return registry.unsettleable(m.job, a, b);
        }
        (address w, address l) = winner == 0 ? (a, b) : (b, a);
        emit MatchDecided(id, w, l, level, reason);
        registry.decide(m.job, w, l);
    }
}
