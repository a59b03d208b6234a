// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Merkle} from "./lib/Merkle.sol";
import {Tensors} from "./lib/Tensors.sol";

/// @title Verde jobs: payment, stakes, sealed results, settlement, pull payments
/// @notice A client posts a job (its commitments and the payment; optionally the only
/// trainers who may join); trainers join by staking, post a sealed result before the commit
/// deadline and reveal it after (or as soon as every seat has committed: nobody can seal a
/// copy then); `settle` (after the reveal deadline, or once everyone revealed) accepts a result
/// all revealed trainers agree on, or asks for one match at a time (`requested`) that the game
/// decides (`decide`, `draw`).
/// Every path ends in withdrawable balances: a trainer that loses a match, draws one, or
/// never reveals forfeits its stake into the job's pot; at settlement the accepted trainers
/// get their stakes back and share the payment and the pot, so a coalition of cheaters loses
/// every stake it put up (a side match among them moves nothing into their pockets); a job
/// nobody delivers refunds the client its payment and the pot. No fee. docs/PROTOCOL.md §6.
/// Terms have floors fixed at deployment (clock, commit and reveal windows): an honest
/// trainer cannot be timed out by a client's terms the contract accepted.
/// A run whose step s faults (bad data or program: docs/NUMERICS.md §14) ends in a fault claim,
/// revealed with its step (`revealFault`) and disputed like any claim; accepted, it returns the
/// accepted trainers' stakes and pays them for the s steps done (payment · s / steps, and the
/// pot), the rest of the payment back to the client; there is no model to deliver.
/// Delivery (a deployment with a delivery window): an accepted trainer's stake and share are
/// held for the window after settlement; the client may challenge it to put ranges of chunks
/// of the accepted state on chain (proven against the accepted claim), paying a bond per chunk
/// that goes to the trainer for each chunk answered; any chunk left unanswered at its deadline
/// gives the held amount (and the unanswered bonds) to the client. The client releases early
/// once it has its model. A spec hash whose claim was revealed in a job cannot be posted again
/// (its result would be replayed, not computed; a reveal in the post's own block does not count:
/// no front-runner's veto). §6.
/// @dev Invariant (tests/contracts, forge invariant test): this contract's balance ==
/// escrow (payments and stakes of unsettled jobs) + totalOwed (sum of `owed`).
contract JobRegistry {
    struct Terms {
        bytes32 specHash; // the job id: H(canonical job spec)
        bytes32 graphRoot; // the step graph (docs/PROTOCOL.md §4)
        bytes32 initialClaim; // C_0
        bytes32 dataRoot; // the steps' batches
        bytes32 stateMapRoot; // per end-of-step state tensor: its producer (7-byte refs)
        bytes32 kernelRoot; // per node: u32 kernel count || root of its kernel structures (levels 3-5)
        uint32 graphNodes; // nodes per step
        uint16 stateCount; // state tensors
        uint32 steps;
        uint16 fanout;
        uint32 chunk;
        uint8 maxTrainers;
        uint96 stake;
        uint64 joinBy;
        uint64 commitBy;
        uint64 revealBy;
        uint64 clock; // seconds each party may spend on its moves in a dispute
    }

    enum Status {
        None,
        Open,
        Disputed,
        Settled
    }

    struct Job {
        address client; // one slot with the payment and the status: posting writes one less
        uint88 payment; // (2^88 wei: 3 * 10^8 ETH)
        Status status;
        bytes32 accepted;
        Terms terms;
        address[] trainers;
        uint256 pot; // forfeited stakes, shared by the accepted trainers at settlement
        bool restricted; // only the trainers the client named may join
        address[2] requested; // the match `settle` asks for while Disputed, lower address first
        uint64 settledAt;
    }

    /// @dev An accepted trainer's stake and share while its delivery may be challenged, and
    /// where its answers stand; one slot. Challenges are answered in the order asked.
    struct Hold {
        uint128 amount;
        uint32 asked; // challenges so far: asks[id][trainer][0 .. asked)
        uint32 answered; // challenges answered in full: the next to answer is asks[..][answered]
        uint32 done; // chunks of that one answered so far
        uint32 pending; // chunks asked and not answered, over every challenge: their bonds are held
    }

    /// @dev One challenge: chunks first .. first + count - 1 of state tensor `tensor`, all due by
    /// `due`; one slot.
    struct Ask {
        uint16 tensor;
        uint32 first;
        uint32 count;
        uint64 due;
    }

    /// @dev Consecutive chunks of one state tensor of the accepted final state, proven:
    /// C_T = H(0x06 || S_T || R_T), the tensor's commitment is its leaf of S_T, each chunk opens
    /// that commitment.
    struct Delivered {
        bytes32 stateRoot;
        bytes32 traceRoot;
        bytes32 commitment;
        bytes32[] stateProof;
        Tensors.ElementProof[] chunks;
    }

    struct FirstReveal {
        uint192 job;
        uint64 atBlock;
    }

    struct Seat {
        bool joined;
        bool out; // lost a dispute, or never revealed
        bytes32 sealHash;
        bytes32 claim;
    }

    event JobPosted(uint256 indexed id, address indexed client, bytes32 specHash, uint256 payment, uint256 stake);
    event Joined(uint256 indexed id, address indexed trainer);
    event Committed(uint256 indexed id, address indexed trainer, bytes32 seal);
    event Revealed(uint256 indexed id, address indexed trainer, bytes32 claim);
    event DisputeRequired(uint256 indexed id, address indexed a, address indexed b);
    event Decided(uint256 indexed id, address indexed winner, address indexed loser);
    event Drawn(uint256 indexed id, address indexed a, address indexed b);
    event Unsettleable(uint256 indexed id, address indexed a, address indexed b);
    event FaultAccepted(uint256 indexed id, uint256 step, uint256 paid, uint256 refunded);
    event Forfeited(uint256 indexed id, address indexed trainer, uint256 stake, string why);
    event Settled(uint256 indexed id, bytes32 accepted, uint256 paidTrainers);
    event Held(uint256 indexed id, address indexed trainer, uint256 amount, uint256 until);
    event DeliveryChallenged(
        uint256 indexed id, address indexed trainer, uint256 tensor, uint256 first, uint256 count, uint256 due
    );
    event DeliveryAnswered(uint256 indexed id, address indexed trainer, uint256 tensor, uint256 chunk, bytes data);
    event Released(uint256 indexed id, address indexed trainer, uint256 amount);
    event Withdrawn(address indexed to, uint256 amount);

    error NoPayment();
    error BadTerms(string what);
    error UnknownJob(uint256 id);
    error JoinClosed(uint256 id);
    error WrongStake(uint256 sent, uint256 want);
    error AlreadyJoined(address trainer);
    error JobFull(uint256 id);
    error NotATrainer(address who);
    error CommitClosed(uint256 id);
    error AlreadyCommitted(address trainer);
    error RevealNotOpen(uint256 id, uint256 opens, uint256 closes);
    error NotCommitted(address trainer);
    error SealMismatch(address trainer);
    error AlreadyRevealed(address trainer);
    error TooEarly(uint256 id, uint256 opensAt);
    error WrongStatus(uint256 id, Status status);
    error OnlyGame(address caller);
    error NotRequested(address a, address b);
    error NothingOwed(address who);
    error TransferFailed(address to, uint256 amount);
    error Reentrancy();
    error BelowFloor(string what, uint256 got, uint256 floor);
    error NotApproved(uint256 id, address trainer);
    error NotClient(address caller);
    error NothingHeld(uint256 id, address trainer);
    error ChallengeClosed(uint256 id, uint256 closedAt);
    error ChallengeOpen(uint256 id, address trainer, uint256 due);
    error BadRange(uint256 count, uint256 most);
    error WrongBond(uint256 sent, uint256 want);
    error MoreThanAsked(uint256 id, address trainer);
    error SpecRevealedBefore(bytes32 specHash, uint256 earlierJob);
    error NoSuchTensor(uint256 tensor, uint256 count);
    error NoChallenge(uint256 id, address trainer);
    error AnswerLate(uint256 id, uint256 due);
    error NotTheResult(string what);

    /// @notice The largest chunk a job may have, in elements: every move that carries chunk bytes
    /// (at most 4 chunks of 8-byte elements) stays under 100 KB of calldata and 10 M gas
    /// (geth's 128 KB transaction limit, EIP-7825's 2^24 gas cap). docs/PROTOCOL.md §3.
    uint32 public constant MAX_CHUNK = 2048;
    /// @notice The most chunks one challenge asks for: each challenge gets its own answer window.
    uint32 public constant MAX_RANGE = 64;

    address public immutable game;
    uint64 public immutable minClock; // seconds per party per match
    uint64 public immutable minCommitWindow; // commitBy - joinBy: the latest joiner's time to train
    uint64 public immutable minRevealWindow; // revealBy - commitBy
    uint64 public immutable deliveryWindow; // after settlement: the client may challenge delivery (0: paid at once)
    uint64 public immutable answerWindow; // a challenged trainer's time to put one challenge's chunks on chain
    uint256 public immutable bond; // wei per challenged chunk, paid with the challenge: covers an answer's gas
    uint256 public nextId = 1;
    uint256 public escrow;
    uint256 public totalOwed;
    mapping(address => uint256) public owed;
    mapping(uint256 => Job) internal jobs;
    mapping(uint256 => mapping(address => Seat)) public seats;
    mapping(uint256 => mapping(address => bool)) public approved;
    mapping(uint256 => mapping(address => Hold)) public holds;
    /// @notice A trainer's revealed fault claim: the step that faulted, plus one (0: a result claim).
    mapping(uint256 => mapping(address => uint32)) public faultAt;
    mapping(uint256 => mapping(address => mapping(uint256 => Ask))) public asks;
    /// @dev spec hash -> the first job a claim of it was revealed in, and that reveal's block; one slot
    mapping(bytes32 => FirstReveal) internal firstReveal;
    uint256 private locked = 1;

    constructor(
        address game_,
        uint64 minClock_,
        uint64 minCommitWindow_,
        uint64 minRevealWindow_,
        uint64 deliveryWindow_,
        uint64 answerWindow_,
        uint256 bond_
    ) {
        game = game_;
        (minClock, minCommitWindow, minRevealWindow) = (minClock_, minCommitWindow_, minRevealWindow_);
        (deliveryWindow, answerWindow, bond) = (deliveryWindow_, answerWindow_, bond_);
    }

    modifier nonReentrant() {
        if (locked != 1) revert Reentrancy();
        locked = 2;
        _;
        locked = 1;
    }

    function job(uint256 id) external view returns (Job memory) {
        return jobs[id];
    }

    function terms(uint256 id) external view returns (Terms memory) {
        return jobs[id].terms;
    }

    /// @notice Terms' bytes32 fields in order: `anchor` reads one of them by its place.
    enum Root {
        Spec,
        Graph,
        Initial,
        Data,
        StateMap,
        Kernel,
        None
    }

    /// @notice One of the job's commitments (None: no root) and the sizes the games check
    /// proofs against: two storage reads where `terms` costs eight, at almost every dispute move.
    function anchor(uint256 id, Root which)
        external
        view
        returns (bytes32 root, uint256 graphNodes, uint256 stateCount, uint256 chunk)
    {
        Terms storage t = jobs[id].terms;
        if (which != Root.None) {
            assembly ("memory-safe") {
                root := sload(add(t.slot, which))
            }
        }
        return (root, t.graphNodes, t.stateCount, t.chunk);
    }

    /// @notice The first job a claim of `specHash` was revealed in (0: none): from the next block on,
    /// `post` refuses that spec (SpecRevealedBefore).
    function revealedIn(bytes32 specHash) external view returns (uint256) {
        return firstReveal[specHash].job;
    }

    function trainers(uint256 id) external view returns (address[] memory) {
        return jobs[id].trainers;
    }

    /// @notice The match `settle` asked for last, lower address first (both zero before the
    /// first dispute and once settled; the decided pair until the next settle).
    function requested(uint256 id) external view returns (address, address) {
        return (jobs[id].requested[0], jobs[id].requested[1]);
    }

    /// @notice What DisputeGame.open reads, and nothing more (a whole Job costs some twenty
    /// storage reads): the status, the requested pair and the terms a match plays by.
    function opening(uint256 id)
        external
        view
        returns (Status status, address[2] memory pair, uint256 steps, uint256 fanout, uint256 clock)
    {
        Job storage j = jobs[id];
        return (j.status, j.requested, j.terms.steps, j.terms.fanout, j.terms.clock);
    }

    /// @notice Post a job with its payment (msg.value); any trainer may join.
    /// @dev CAUTION: a spec hash already revealed in an earlier job (an earlier block) is refused
    /// (`SpecRevealedBefore`): that result is public, so a trainer could replay it unearned.
    function post(Terms calldata t) external payable returns (uint256) {
        return _post(t);
    }

    /// @notice Post a job only the named trainers may join: the client's answer to one party
    /// holding every seat of an open job (docs/PROTOCOL.md §6), e.g. its own honest trainer
    /// among them.
    function postFor(Terms calldata t, address[] calldata only) external payable returns (uint256 id) {
        if (only.length == 0) revert BadTerms("postFor needs at least one trainer");
        id = _post(t);
        jobs[id].restricted = true;
        for (uint256 i; i < only.length; ++i) approved[id][only[i]] = true;
    }

    function _post(Terms calldata t) internal returns (uint256 id) {
        if (msg.value == 0) revert NoPayment();
        if (msg.value > type(uint88).max) revert BadTerms("payment too large");
        if (t.steps == 0) revert BadTerms("steps");
        if (t.fanout < 2) revert BadTerms("fanout");
        if (t.chunk == 0) revert BadTerms("chunk");
        if (t.chunk > MAX_CHUNK) revert BadTerms("chunk above MAX_CHUNK: its moves would not fit a block");
        // (not a reveal in this very block: a front-runner that saw this post pending could post the
        // spec, seal and reveal junk ahead of it in one transaction, the early window open at once)
        FirstReveal memory r = firstReveal[t.specHash];
        if (r.job != 0 && r.atBlock < block.number) revert SpecRevealedBefore(t.specHash, r.job);
        if (t.maxTrainers == 0) revert BadTerms("maxTrainers");
        if (t.stake == 0) revert BadTerms("stake");
        if (!(block.timestamp < t.joinBy && t.joinBy <= t.commitBy && t.commitBy < t.revealBy)) {
            revert BadTerms("deadlines: now < joinBy <= commitBy < revealBy");
        }
        if (t.clock < minClock) revert BelowFloor("clock", t.clock, minClock);
        if (t.commitBy - t.joinBy < minCommitWindow) revert BelowFloor("commit window", t.commitBy - t.joinBy, minCommitWindow);
        if (t.revealBy - t.commitBy < minRevealWindow) revert BelowFloor("reveal window", t.revealBy - t.commitBy, minRevealWindow);
        if (t.graphNodes == 0 || t.stateCount == 0) revert BadTerms("graph");
        id = nextId++;
        Job storage j = jobs[id];
        j.client = msg.sender;
        j.payment = uint88(msg.value);
        j.status = Status.Open;
        j.terms = t;
        escrow += msg.value;
        emit JobPosted(id, msg.sender, t.specHash, msg.value, t.stake);
    }

    function _open(uint256 id) internal view returns (Job storage j) {
        j = jobs[id];
        if (j.status == Status.None) revert UnknownJob(id);
    }

    /// @notice Join a job by staking exactly its stake.
    function join(uint256 id) external payable {
        Job storage j = _open(id);
        if (j.status != Status.Open || block.timestamp >= j.terms.joinBy) revert JoinClosed(id);
        if (msg.value != j.terms.stake) revert WrongStake(msg.value, j.terms.stake);
        if (j.restricted && !approved[id][msg.sender]) revert NotApproved(id, msg.sender);
        Seat storage s = seats[id][msg.sender];
        if (s.joined) revert AlreadyJoined(msg.sender);
        if (j.trainers.length >= j.terms.maxTrainers) revert JobFull(id);
        s.joined = true;
        j.trainers.push(msg.sender);
        escrow += msg.value;
        emit Joined(id, msg.sender);
    }

    /// @notice The seal of one's result: sha256(0x07 || specHash || trainer address || claim || salt).
    function sealOf(bytes32 specHash, address trainer, bytes32 claim, bytes32 salt) public pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x07), specHash, trainer, claim, salt));
    }

    function commit(uint256 id, bytes32 sealHash) external {
        Job storage j = _open(id);
        Seat storage s = seats[id][msg.sender];
        if (!s.joined) revert NotATrainer(msg.sender);
        if (block.timestamp >= j.terms.commitBy) revert CommitClosed(id);
        if (s.sealHash != bytes32(0)) revert AlreadyCommitted(msg.sender);
        s.sealHash = sealHash;
        emit Committed(id, msg.sender, sealHash);
    }

    /// @notice Has every seat that can ever be taken committed? Joining is over (every seat taken,
    /// or the join deadline passed) and each trainer that joined has sealed: nobody can commit any
    /// more, so a claim revealed now can be copied into no seal. Then the reveal window opens
    /// before the commit deadline.
    function everyoneCommitted(uint256 id) public view returns (bool) {
        return _everyone(id, false);
    }

    /// @notice Has every trainer that will ever reveal revealed? everyoneCommitted, and each
    /// trainer's claim is on chain: the reveal window has nothing left to wait for, so the job
    /// may settle before the reveal deadline.
    function everyoneRevealed(uint256 id) public view returns (bool) {
        return _everyone(id, true);
    }

    /// @dev Joining is over and every seat taken has sealed (revealed: has revealed).
    function _everyone(uint256 id, bool revealed) internal view returns (bool) {
        Job storage j = _open(id);
        if (!_joiningOver(j)) return false;
        address[] storage ts = j.trainers;
        for (uint256 i; i < ts.length; ++i) {
            Seat storage s = seats[id][ts[i]];
            if ((revealed ? s.claim : s.sealHash) == bytes32(0)) return false;
        }
        return true;
    }

    /// @dev Every seat taken, or the join deadline passed: nobody can join any more.
    function _joiningOver(Job storage j) internal view returns (bool) {
        return j.trainers.length >= j.terms.maxTrainers || block.timestamp >= j.terms.joinBy;
    }

    /// @notice Reveal after the commit deadline, or sooner once everyone committed (so nobody can
    /// copy a revealed claim in time), and before the reveal deadline.
    function reveal(uint256 id, bytes32 claim, bytes32 salt) external {
        _reveal(id, claim, salt);
    }

    /// @notice Reveal a fault claim: step `step` of the run faults, and `traceRoot` is that
    /// step's trace up to its faulting node (the claim is sha256(0x06 || sha256(0x0A || u32 step)
    /// || traceRoot), docs/PROTOCOL.md §6). Settled like any claim; accepted, it pays for `step`
    /// steps.
    function revealFault(uint256 id, uint32 step, bytes32 traceRoot, bytes32 salt) external {
        if (step >= _open(id).terms.steps) revert BadTerms("fault step");
        _reveal(id, sha256(abi.encodePacked(bytes1(0x06), sha256(abi.encodePacked(bytes1(0x0a), step)), traceRoot)), salt);
        faultAt[id][msg.sender] = step + 1;
    }

    function _reveal(uint256 id, bytes32 claim, bytes32 salt) internal {
        Job storage j = _open(id);
        Seat storage s = seats[id][msg.sender];
        if (!s.joined) revert NotATrainer(msg.sender);
        if (j.status != Status.Open) revert WrongStatus(id, j.status);
        if (block.timestamp >= j.terms.revealBy || (block.timestamp < j.terms.commitBy && !everyoneCommitted(id))) {
            revert RevealNotOpen(id, j.terms.commitBy, j.terms.revealBy);
        }
        if (s.sealHash == bytes32(0)) revert NotCommitted(msg.sender);
        if (s.claim != bytes32(0)) revert AlreadyRevealed(msg.sender);
        if (sealOf(j.terms.specHash, msg.sender, claim, salt) != s.sealHash) revert SealMismatch(msg.sender);
        s.claim = claim;
        FirstReveal storage r = firstReveal[j.terms.specHash];
        if (r.job == 0) (r.job, r.atBlock) = (uint192(id), uint64(block.number)); // no later repost can replay it
        emit Revealed(id, msg.sender, claim);
    }

    function _credit(address to, uint256 amount) internal {
        if (amount == 0) return;
        escrow -= amount;
        owed[to] += amount;
        totalOwed += amount;
    }

    function _forfeit(uint256 id, Job storage j, address who, string memory why) internal {
        seats[id][who].out = true;
        j.pot += j.terms.stake;
        emit Forfeited(id, who, j.terms.stake, why);
    }

    /// @notice After the reveal deadline, or sooner once everyone revealed (everyoneRevealed):
    /// forfeit the stakes of trainers that did not reveal, then accept the result if the rest
    /// agree, refund a job nobody delivered, or ask for the next match (the first two live
    /// trainers that disagree). Anyone may call it, again after each decision (the winner's
    /// agent does).
    function settle(uint256 id) external {
        Job storage j = _open(id);
        address[] storage ts = j.trainers;
        // before the reveal deadline only once every seat has revealed (everyoneRevealed, checked in
        // the loop below: each seat's claim read once)
        if (block.timestamp < j.terms.revealBy && !_joiningOver(j)) revert TooEarly(id, j.terms.revealBy);
        if (j.status != Status.Open) revert WrongStatus(id, j.status);
        bytes32 first;
        address firstT;
        address otherT;
        uint256 live;
        for (uint256 i; i < ts.length; ++i) {
            Seat storage s = seats[id][ts[i]];
            if (s.out) continue;
            if (s.claim == bytes32(0)) {
                if (block.timestamp < j.terms.revealBy) revert TooEarly(id, j.terms.revealBy); // (it may still reveal)
                _forfeit(id, j, ts[i], "no reveal");
                continue;
            }
            ++live;
            if (first == bytes32(0)) {
                (first, firstT) = (s.claim, ts[i]);
            } else if (s.claim != first && otherT == address(0)) {
                otherT = ts[i];
            }
        }
        if (otherT != address(0)) {
            j.status = Status.Disputed;
            // one canonical order (lower address first), the game's seat order too
            j.requested = firstT < otherT ? [firstT, otherT] : [otherT, firstT];
            emit DisputeRequired(id, j.requested[0], j.requested[1]);
            return;
        }
        j.status = Status.Settled;
        j.accepted = first;
        j.settledAt = uint64(block.timestamp);
        j.requested = [address(0), address(0)];
        uint256 total = j.payment + j.pot;
        if (live == 0) {
            _credit(j.client, total);
            emit Settled(id, bytes32(0), 0);
            return;
        }
        uint256 faulted = _faultOf(id, ts);
        if (faulted != 0) { // the run faults at step faulted - 1: paid for the steps before it
            uint256 paid = j.payment * (faulted - 1) / j.terms.steps;
            _credit(j.client, j.payment - paid);
            emit FaultAccepted(id, faulted - 1, paid, j.payment - paid);
            total = paid + j.pot;
        }
        uint256 share = total / live;
        uint256 rest = total - share * live;
        for (uint256 i; i < ts.length; ++i) {
            if (seats[id][ts[i]].out) continue;
            uint256 amount = j.terms.stake + share + (ts[i] == firstT ? rest : 0);
            if (deliveryWindow == 0 || faulted != 0) { // a fault has no model to deliver
                _credit(ts[i], amount);
            } else {
                holds[id][ts[i]].amount = uint128(amount);
                emit Held(id, ts[i], amount, block.timestamp + deliveryWindow);
            }
        }
        emit Settled(id, first, live);
    }

    /// @dev The accepted claim's fault step plus one, or 0: any live seat that revealed it with
    /// revealFault (the claim names its step, so they all agree; one may have used `reveal`).
    function _faultOf(uint256 id, address[] storage ts) internal view returns (uint256 f) {
        for (uint256 i; i < ts.length; ++i) {
            if (!seats[id][ts[i]].out && faultAt[id][ts[i]] > f) f = faultAt[id][ts[i]];
        }
    }

    function _windowEnd(Job storage j) internal view returns (uint256) {
        return j.settledAt + deliveryWindow;
    }

    function _held(uint256 id, address trainer) internal view returns (Job storage j, Hold storage h) {
        j = _open(id);
        h = holds[id][trainer];
        if (h.amount == 0) revert NothingHeld(id, trainer);
    }

    /// @notice The client asks an accepted trainer to put chunks `first` .. `first + count - 1`
    /// of state tensor `tensor` (state order, docs/PROTOCOL.md §5) of the accepted result on chain,
    /// paying `bond` per chunk (to the trainer for each chunk it answers, back to the client for
    /// each one left unanswered). Only inside the delivery window; any number of challenges of
    /// at most MAX_RANGE chunks, answered in order, each due `answerWindow` after the one before
    /// (or after now): the trainer always has a window per challenge.
    function challenge(uint256 id, address trainer, uint16 tensor, uint32 first, uint32 count) external payable {
        (Job storage j, Hold storage h) = _held(id, trainer);
        if (msg.sender != j.client) revert NotClient(msg.sender);
        if (block.timestamp >= _windowEnd(j)) revert ChallengeClosed(id, _windowEnd(j));
        if (tensor >= j.terms.stateCount) revert NoSuchTensor(tensor, j.terms.stateCount);
        if (count == 0 || count > MAX_RANGE) revert BadRange(count, MAX_RANGE);
        if (msg.value != count * bond) revert WrongBond(msg.value, count * bond);
        uint256 from = block.timestamp;
        if (h.asked > h.answered) {
            uint256 last = asks[id][trainer][h.asked - 1].due;
            if (last > from) from = last;
        }
        uint64 due = uint64(from + answerWindow);
        asks[id][trainer][h.asked] = Ask(tensor, first, count, due);
        ++h.asked;
        h.pending += count;
        escrow += msg.value;
        emit DeliveryChallenged(id, trainer, tensor, first, count, due);
    }

    /// @notice Answer the oldest open challenge with its next chunks, in order (as many per
    /// transaction as fit: each at most MAX_CHUNK elements); anyone holding the accepted result
    /// may. Each chunk answered pays its bond to the trainer. A chunk index past the tensor's
    /// end is answered, with every later one of the challenge, by any chunk of it (its proven
    /// shape shows that they do not exist).
    function answer(uint256 id, address trainer, Delivered calldata d) external {
        (Job storage j, Hold storage h) = _held(id, trainer);
        if (h.answered == h.asked) revert NoChallenge(id, trainer);
        Ask memory a = asks[id][trainer][h.answered];
        if (block.timestamp >= a.due) revert AnswerLate(id, a.due);
        if (sha256(abi.encodePacked(bytes1(0x06), d.stateRoot, d.traceRoot)) != j.accepted) {
            revert NotTheResult("H(0x06 || S || R) is not the accepted claim");
        }
        bytes32 lf = Merkle.leaf(abi.encodePacked(d.commitment));
        if (!Merkle.verify(d.stateRoot, j.terms.stateCount, a.tensor, lf, d.stateProof)) {
            revert NotTheResult("the commitment is not the tensor's leaf of S");
        }
        uint256 c = j.terms.chunk;
        uint256 done = h.done;
        for (uint256 i; i < d.chunks.length; ++i) {
            if (done == a.count) revert MoreThanAsked(id, trainer);
            Tensors.ElementProof calldata p = d.chunks[i];
            if (p.chunk != c) revert NotTheResult("chunk size");
            uint256 want = a.first + done;
            bool exists = want < (Tensors.numel(p.shape) + c - 1) / c;
            if (exists && p.index / c != want) revert NotTheResult("not the chunk asked");
            if (!Tensors.verify(d.commitment, p)) revert NotTheResult("the chunk does not open the commitment");
            if (!exists) {
                done = a.count; // the proven shape: no chunk from `want` on exists
                break;
            }
            ++done;
            emit DeliveryAnswered(id, trainer, a.tensor, want, p.chunkBytes);
        }
        uint256 paid = done - h.done;
        h.pending -= uint32(paid);
        if (done == a.count) (h.answered, h.done) = (h.answered + 1, 0);
        else h.done = uint32(done);
        _credit(trainer, paid * bond);
    }

    /// @notice End a hold (anyone): a challenge left unanswered past its deadline gives the
    /// held amount and the bonds of every unanswered chunk to the client; otherwise, once the
    /// delivery window is over, or at once when the client calls it (it has its model), the
    /// trainer is paid. Not while a challenge is open and not yet due.
    function close(uint256 id, address trainer) external {
        (Job storage j, Hold storage h) = _held(id, trainer);
        uint256 amount = h.amount;
        if (h.answered < h.asked) {
            uint256 due = asks[id][trainer][h.answered].due;
            if (block.timestamp < due) revert ChallengeOpen(id, trainer, due);
            uint256 back = uint256(h.pending) * bond;
            (h.amount, h.pending) = (0, 0);
            _credit(j.client, amount + back);
            emit Forfeited(id, trainer, amount, "did not deliver");
            return;
        }
        if (msg.sender != j.client && block.timestamp < _windowEnd(j)) revert TooEarly(id, _windowEnd(j));
        h.amount = 0;
        _credit(trainer, amount);
        emit Released(id, trainer, amount);
    }

    /// @dev The game ends the requested match: the caller, the status and the pair checked once.
    function _ending(uint256 id, address a, address b) internal view returns (Job storage j) {
        if (msg.sender != game) revert OnlyGame(msg.sender);
        j = _open(id);
        if (j.status != Status.Disputed) revert WrongStatus(id, j.status);
        (address lo, address hi) = a < b ? (a, b) : (b, a);
        if (j.requested[0] != lo || j.requested[1] != hi) revert NotRequested(a, b);
    }

    /// @notice The game's decision of the requested match: the loser is out, its stake goes
    /// to the pot; the job is open for `settle` again (accept, or ask for the next match).
    /// Settling is its own transaction so that the deciding move (a level-5 step, say) stays
    /// small: it is most of what a decision would otherwise cost (issue #21).
    function decide(uint256 id, address winner, address loser) external {
        Job storage j = _ending(id, winner, loser);
        _forfeit(id, j, loser, "lost a match");
        emit Decided(id, winner, loser);
        j.status = Status.Open;
    }

    /// @notice Both parties of the requested match let their clocks run out at the same
    /// instant: both are out, both stakes go to the pot.
    function draw(uint256 id, address a, address b) external {
        Job storage j = _ending(id, a, b);
        _forfeit(id, j, a, "drew a match");
        _forfeit(id, j, b, "drew a match");
        emit Drawn(id, a, b);
        j.status = Status.Open;
    }

    /// @notice The requested match reached a node of the job the chain cannot settle (a job posted
    /// straight to the registry: `Verde.post` and every honest agent refuse one): nobody can be
    /// shown wrong, so both are out and get their stakes back, never a loss for either.
    function unsettleable(uint256 id, address a, address b) external {
        Job storage j = _ending(id, a, b);
        seats[id][a].out = true;
        seats[id][b].out = true;
        _credit(a, j.terms.stake);
        _credit(b, j.terms.stake);
        emit Unsettleable(id, a, b);
        j.status = Status.Open;
    }

    /// @notice Pull payment: checks, effects, then the one interaction.
    function withdraw() external nonReentrant {
        uint256 amount = owed[msg.sender];
        if (amount == 0) revert NothingOwed(msg.sender);
        owed[msg.sender] = 0;
        totalOwed -= amount;
        (bool ok,) = msg.sender.call{value: amount}("");
        if (!ok) revert TransferFailed(msg.sender, amount);
        emit Withdrawn(msg.sender, amount);
    }
}
