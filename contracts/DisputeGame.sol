// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Bisection, Clock} from "./lib/Bisection.sol";
import {JobRegistry} from "./JobRegistry.sol";

/// @title The dispute game on chain (docs/PROTOCOL.md §7), the same levels as the off-chain
/// referee (offchain/dispute). Implemented so far: level 1 (N-ary rounds over the step
/// claims) and the opening of the disputed step's claims that starts level 2, with chess
/// clocks and timeouts; a decided match goes to the registry (JobRegistry.decide).
/// @dev Party 0 and party 1 move in the same rounds: each posts its answer, the round
/// closes when both have. Only the two parties move; every move is checked against the
/// phase, the party's clock and what it said before.
contract DisputeGame {
    using Bisection for Bisection.Nary;
    using Clock for Clock.Clocks;

    enum Phase {
        None,
        Steps, // level 1
        Open, // level 2 starts: open C_{s+1} (and C_s)
        Nodes, // level 2 proper (next: node descent, Cases 1-2, levels 3-5)
        Done
    }

    struct Match {
        uint256 job;
        address[2] party;
        Phase phase;
        Bisection.Nary nary;
        Clock.Clocks clock;
        uint8 posted; // bit i: party i moved this round
        bytes32[2] stateRoot; // S_{s+1} opened by each
        bytes32[2] traceRoot; // R_{s+1}
        bytes32 stateBefore; // S_s (agreed)
    }

    event MatchOpened(uint256 indexed id, uint256 indexed job, address a, address b, uint256 steps, uint256 fanout);
    event StepRound(uint256 indexed id, uint256 lo, uint256 hi, uint256[] points);
    event StepFound(uint256 indexed id, uint256 step);
    event Opened(uint256 indexed id, bytes32[2] stateRoots, bytes32[2] traceRoots);
    event MatchDecided(uint256 indexed id, address indexed winner, address indexed loser, uint8 level, string reason);

    error RegistryAlreadySet();
    error NotDeployer(address caller);
    error NotDisputed(uint256 job);
    error NotAParty(uint256 id, address who);
    error WrongPhase(uint256 id, Phase phase);
    error AlreadyMoved(uint256 id, address who);
    error ClaimsAgree();
    error NobodyTimedOut(uint256 id);

    JobRegistry public registry;
    address internal immutable deployer;
    uint256 public nextId = 1;
    mapping(uint256 => Match) internal matches;
    /// @dev match -> party -> point -> the step claim it made there
    mapping(uint256 => mapping(uint256 => mapping(uint256 => bytes32))) public claimAt;
    mapping(uint256 => bytes32[][2]) internal pending;

    constructor() {
        deployer = msg.sender;
    }

    function setRegistry(JobRegistry r) external {
        if (msg.sender != deployer) revert NotDeployer(msg.sender);
        if (address(registry) != address(0)) revert RegistryAlreadySet();
        registry = r;
    }

    function state(uint256 id)
        external
        view
        returns (Phase phase, uint256 lo, uint256 hi, uint64[2] memory clockLeft, uint8 waiting)
    {
        Match storage m = matches[id];
        return (m.phase, m.nary.lo, m.nary.hi, m.clock.left, m.clock.waiting);
    }

    function parties(uint256 id) external view returns (address[2] memory) {
        return matches[id].party;
    }

    /// @notice The points both parties must answer in the current step round.
    function roundPoints(uint256 id) public view returns (uint256[] memory) {
        Match storage m = matches[id];
        return Bisection.points(m.nary.lo, m.nary.hi, m.nary.n);
    }

    /// @notice Open a match between two trainers of a disputed job with different claims.
    function open(uint256 job, address a, address b) external returns (uint256 id) {
        JobRegistry.Job memory j = registry.job(job);
        if (j.status != JobRegistry.Status.Disputed) revert NotDisputed(job);
        (,, , bytes32 ca) = registry.seats(job, a);
        (,, , bytes32 cb) = registry.seats(job, b);
        (, bool outA,,) = registry.seats(job, a);
        (, bool outB,,) = registry.seats(job, b);
        if (outA || ca == bytes32(0)) revert NotAParty(0, a);
        if (outB || cb == bytes32(0)) revert NotAParty(0, b);
        if (ca == cb) revert ClaimsAgree();
        id = nextId++;
        Match storage m = matches[id];
        m.job = job;
        m.party = [a, b];
        m.phase = Phase.Steps;
        m.nary = Bisection.Nary(0, j.terms.steps, j.terms.fanout);
        m.clock.init(j.terms.clock);
        for (uint256 i; i < 2; ++i) claimAt[id][i][0] = j.terms.initialClaim;
        claimAt[id][0][j.terms.steps] = ca;
        claimAt[id][1][j.terms.steps] = cb;
        emit MatchOpened(id, job, a, b, j.terms.steps, j.terms.fanout);
        _nextRound(id, m);
    }

    function _party(uint256 id, Match storage m) internal view returns (uint256) {
        if (msg.sender == m.party[0]) return 0;
        if (msg.sender == m.party[1]) return 1;
        revert NotAParty(id, msg.sender);
    }

    function _move(uint256 id, Match storage m, Phase want) internal returns (uint256 i) {
        if (m.phase != want) revert WrongPhase(id, m.phase);
        i = _party(id, m);
        if (m.posted & (uint8(1) << uint8(i)) != 0) revert AlreadyMoved(id, msg.sender);
        m.clock.moved(i);
        m.posted |= uint8(1) << uint8(i);
    }

    function _nextRound(uint256 id, Match storage m) internal {
        m.posted = 0;
        m.clock.await_(3);
        if (m.phase == Phase.Steps) {
            if (m.nary.done()) {
                m.phase = Phase.Open;
                emit StepFound(id, m.nary.lo);
            } else {
                emit StepRound(id, m.nary.lo, m.nary.hi, roundPoints(id));
            }
        }
    }

    /// @notice Level 1: this round's step claims, one per point of roundPoints(id).
    function postClaims(uint256 id, bytes32[] calldata claims) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Steps);
        uint256[] memory ps = roundPoints(id);
        if (claims.length != ps.length) revert Bisection.WrongPointCount(claims.length, ps.length);
        for (uint256 k; k < ps.length; ++k) claimAt[id][i][ps[k]] = claims[k];
        if (m.posted != 3) return;
        bytes32[] memory a = new bytes32[](ps.length);
        bytes32[] memory b = new bytes32[](ps.length);
        for (uint256 k; k < ps.length; ++k) (a[k], b[k]) = (claimAt[id][0][ps[k]], claimAt[id][1][ps[k]]);
        m.nary.narrow(a, b);
        _nextRound(id, m);
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
        uint256 lo = m.nary.lo;
        if (_claim(s1, r1) != claimAt[id][i][lo + 1]) {
            return _decide(id, m, 1 - i, 2, "its opening of the disputed step claim does not hash to its level-1 claim");
        }
        if (lo > 0 && _claim(s0, r0) != claimAt[id][i][lo]) {
            return _decide(id, m, 1 - i, 2, "its opening of the agreed step claim does not hash to it");
        }
        m.stateRoot[i] = s1;
        m.traceRoot[i] = r1;
        if (lo > 0) m.stateBefore = s0;
        if (m.posted != 3) return;
        m.phase = Phase.Nodes;
        emit Opened(id, m.stateRoot, m.traceRoot);
        _nextRound(id, m);
    }

    /// @notice Anyone may end a match whose waiting party let its clock run out.
    function timeout(uint256 id) external {
        Match storage m = matches[id];
        if (m.phase == Phase.None || m.phase == Phase.Done) revert WrongPhase(id, m.phase);
        uint256 p = m.clock.expired();
        if (p == 2) revert NobodyTimedOut(id);
        _decide(id, m, 1 - p, uint8(m.phase == Phase.Steps ? 1 : 2), "its clock ran out");
    }

    function _decide(uint256 id, Match storage m, uint256 winner, uint8 level, string memory reason) internal {
        m.phase = Phase.Done;
        address w = m.party[winner];
        address l = m.party[1 - winner];
        emit MatchDecided(id, w, l, level, reason);
        registry.decide(m.job, w, l);
    }
}
