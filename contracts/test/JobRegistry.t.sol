// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "./Cheats.sol";
import {JobRegistry} from "../JobRegistry.sol";
import {Merkle} from "../lib/Merkle.sol";
import {Tensors} from "../lib/Tensors.sol";

/// @dev A trainer that tries to re-enter withdraw() from its receive().
contract Reenterer {
    JobRegistry internal reg;
    bool internal attack;

    constructor(JobRegistry r) {
        reg = r;
    }

    function joinAndCommit(uint256 id, bytes32 s) external payable {
        reg.join{value: msg.value}(id);
        reg.commit(id, s);
    }

    function reveal(uint256 id, bytes32 c, bytes32 salt) external {
        reg.reveal(id, c, salt);
    }

    function withdraw(bool attack_) external {
        attack = attack_;
        reg.withdraw();
    }

    receive() external payable {
        if (attack) reg.withdraw();
    }
}

/// @dev A front-runner of a client's post: in one transaction it posts the same spec, takes every
/// seat, seals and reveals junk (the window opens at once: every seat sealed) and settles, all it
/// put in back.
contract FrontRunner {
    function run(JobRegistry reg, JobRegistry.Terms memory t) external payable {
        uint256 id = reg.post{value: 1}(t);
        reg.join{value: t.stake}(id);
        reg.commit(id, reg.sealOf(t.specHash, address(this), "junk", 0));
        reg.reveal(id, "junk", 0);
        reg.settle(id);
        reg.withdraw();
    }

    receive() external payable {}
}

contract JobRegistryTest is Test {
    JobRegistry internal reg;
    address internal constant GAME = address(0x6A3E);
    address internal constant CLIENT = address(0xC11E);
    address internal constant A = address(0xA11CE);
    address internal constant B = address(0xB0B);
    address internal constant C = address(0xCA11);
    uint96 internal constant STAKE = 1 ether;
    uint256 internal constant PAY = 3 ether;
    bytes32 internal constant SPEC = bytes32(uint256(0x5bec));

    function setUp() public {
        reg = new JobRegistry(GAME, 600, 100, 100, 0, 0, 0);
        vm.warp(1000);
        vm.deal(CLIENT, 100 ether);
        vm.deal(A, 10 ether);
        vm.deal(B, 10 ether);
        vm.deal(C, 10 ether);
    }

    function _terms(uint8 maxTrainers) internal view returns (JobRegistry.Terms memory t) {
        t = JobRegistry.Terms({
            specHash: SPEC,
            graphRoot: bytes32(uint256(1)),
            initialClaim: bytes32(uint256(2)),
            dataRoot: bytes32(uint256(3)),
            stateMapRoot: bytes32(uint256(4)),
            kernelRoot: bytes32(uint256(5)),
            graphNodes: 187,
            stateCount: 30,
            steps: 40,
            fanout: 4,
            chunk: 256,
            maxTrainers: maxTrainers,
            stake: STAKE,
            joinBy: uint64(block.timestamp + 100),
            commitBy: uint64(block.timestamp + 200),
            revealBy: uint64(block.timestamp + 300),
            clock: 3600
        });
    }

    function _post(uint8 n) internal returns (uint256 id) {
        vm.prank(CLIENT);
        id = reg.post{value: PAY}(_terms(n));
    }

    function _enter(uint256 id, address t, bytes32 claim) internal {
        vm.prank(t);
        reg.join{value: STAKE}(id);
        bytes32 s = reg.sealOf(SPEC, t, claim, bytes32(uint256(uint160(t))));
        vm.prank(t);
        reg.commit(id, s);
    }

    function _reveal(uint256 id, address t, bytes32 claim) internal {
        vm.prank(t);
        reg.reveal(id, claim, bytes32(uint256(uint160(t))));
    }

    /// @dev Three trainers join in this order, reveal, and the job is settled (disputed).
    function _threeSettled(address[3] memory who, bytes32[3] memory claims) internal returns (uint256 id) {
        id = _post(3);
        for (uint256 i; i < 3; ++i) _enter(id, who[i], claims[i]);
        vm.warp(1250);
        for (uint256 i; i < 3; ++i) _reveal(id, who[i], claims[i]);
        vm.warp(1300);
        reg.settle(id);
    }

    function _balanced() internal view {
        assertEq(address(reg).balance, reg.escrow() + reg.totalOwed(), "balance == escrow + owed");
    }

    function test_seal_matches_the_python_vector() public view {
        string memory json = vm.readFile("tests/vectors/protocol.json");
        bytes32 got = reg.sealOf(vm.parseJsonBytes32(json, ".claims[0].job_id"), address(0xA11CE),
            vm.parseJsonBytes32(json, ".claims[0].claim"), vm.parseJsonBytes32(json, ".claims[0].salt"));
        assertEq(uint256(got), uint256(vm.parseJsonBytes32(json, ".claims[0].seal_address")), "seal");
    }

    function test_agreeing_trainers_share_the_payment_and_get_their_stakes_back() public {
        uint256 id = _post(2);
        _enter(id, A, "r");
        _enter(id, B, "r");
        vm.warp(block.timestamp + 200);
        _reveal(id, A, "r");
        _reveal(id, B, "r");
        vm.warp(block.timestamp + 100);
        reg.settle(id);
        assertEq(reg.owed(A), STAKE + PAY / 2, "A");
        assertEq(reg.owed(B), STAKE + PAY / 2, "B");
        assertEq(reg.escrow(), 0, "nothing left in escrow");
        _balanced();
        uint256 before = A.balance;
        vm.prank(A);
        reg.withdraw();
        assertEq(A.balance - before, STAKE + PAY / 2, "withdrawn");
        _balanced();
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.NothingOwed.selector, A));
        reg.withdraw();
    }

    function test_guards_name_what_is_wrong() public {
        uint256 id = _post(1);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.WrongStake.selector, 1, STAKE));
        reg.join{value: 1}(id);
        _enter(id, A, "r");
        vm.prank(B);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.JobFull.selector, id));
        reg.join{value: STAKE}(id);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.AlreadyCommitted.selector, A));
        reg.commit(id, "x");
        vm.prank(A); // (its one seat committed: the reveal window is open before the commit deadline)
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.SealMismatch.selector, A));
        reg.reveal(id, "other", bytes32(uint256(uint160(A))));
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.TooEarly.selector, id, 1300));
        reg.settle(id); // A has not revealed
        vm.warp(1300);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.RevealNotOpen.selector, id, 1200, 1300));
        reg.reveal(id, "r", bytes32(uint256(uint160(A))));
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.UnknownJob.selector, 99));
        reg.settle(99);
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.NoPayment.selector));
        reg.post(_terms(1));
        // the payment shares a slot with the client and the status: 88 bits, the rest refused
        vm.deal(CLIENT, uint256(1) << 89);
        JobRegistry.Terms memory t = _terms(1);
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.BadTerms.selector, "payment too large"));
        reg.post{value: uint256(1) << 88}(t);
        vm.prank(CLIENT);
        uint256 big = reg.post{value: (uint256(1) << 88) - 1}(t);
        assertEq(reg.job(big).payment, (uint256(1) << 88) - 1, "the largest payment is kept whole");
        assertEq(uint256(reg.job(big).status), uint256(JobRegistry.Status.Open), "next to its status");
    }

    /// anchor reads a root by its place among Terms' fields (one sload): each must be the field
    /// terms() returns, the sizes too; None reads no root.
    function test_anchor_reads_each_root_where_terms_holds_it() public {
        uint256 id = _post(1);
        JobRegistry.Terms memory t = reg.terms(id);
        bytes32[6] memory roots = [t.specHash, t.graphRoot, t.initialClaim, t.dataRoot, t.stateMapRoot, t.kernelRoot];
        for (uint256 r; r < 6; ++r) {
            (bytes32 root, uint256 nodes, uint256 states, uint256 chunk) = reg.anchor(id, JobRegistry.Root(r));
            assertTrue(root == roots[r], "the root at its place");
            assertEq(nodes, t.graphNodes, "graph nodes");
            assertEq(states, t.stateCount, "state tensors");
            assertEq(chunk, t.chunk, "chunk");
        }
        (bytes32 none,,,) = reg.anchor(id, JobRegistry.Root.None);
        assertTrue(none == bytes32(0), "None reads no root");
        (JobRegistry.Status status,, uint256 steps, uint256 fanout, uint256 clock) = reg.opening(id);
        assertEq(uint256(status), uint256(JobRegistry.Status.Open), "status");
        assertEq(steps, t.steps, "steps");
        assertEq(fanout, t.fanout, "fanout");
        assertEq(clock, t.clock, "clock");
    }

    function test_a_copied_seal_does_not_open_for_the_copier_who_forfeits_its_stake() public {
        uint256 id = _post(2);
        _enter(id, A, "r");
        vm.prank(B);
        reg.join{value: STAKE}(id);
        bytes32 copied = reg.sealOf(SPEC, A, "r", bytes32(uint256(uint160(A)))); // A's seal
        vm.prank(B);
        reg.commit(id, copied);
        vm.warp(1250);
        _reveal(id, A, "r");
        vm.prank(B);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.SealMismatch.selector, B));
        reg.reveal(id, "r", bytes32(uint256(uint160(A))));
        vm.warp(1300);
        reg.settle(id);
        assertEq(reg.owed(A), 2 * STAKE + PAY, "A takes the whole payment and the copier's stake");
        assertEq(reg.owed(CLIENT), 0, "the client gains nothing from a forfeit");
        _balanced();
    }

    /// The reveal window opens before the commit deadline once nobody can commit any more (every
    /// seat taken and sealed), and the job settles before the reveal deadline once every seat has
    /// revealed: an honest trainer's result is accepted when its work is done, not when the
    /// windows end. Never sooner: a free seat (before the join deadline) or an unsealed one keeps
    /// the reveal closed (a joiner could copy a revealed claim into its seal), an unrevealed one
    /// keeps settlement closed.
    function test_the_windows_close_early_once_every_seat_has_acted() public {
        uint256 id = _post(2);
        _enter(id, A, "r");
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.RevealNotOpen.selector, id, 1200, 1300));
        reg.reveal(id, "r", bytes32(uint256(uint160(A)))); // a seat is free: B could still join and copy
        assertTrue(!reg.everyoneCommitted(id), "a free seat");
        vm.prank(B);
        reg.join{value: STAKE}(id);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.RevealNotOpen.selector, id, 1200, 1300));
        reg.reveal(id, "r", bytes32(uint256(uint160(A)))); // B has not sealed
        bytes32 sb = reg.sealOf(SPEC, B, "r", bytes32(uint256(uint160(B))));
        vm.prank(B);
        reg.commit(id, sb);
        assertTrue(reg.everyoneCommitted(id) && !reg.everyoneRevealed(id), "every seat sealed");
        vm.warp(1050); // before the join deadline, every seat taken and sealed
        _reveal(id, A, "r");
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.TooEarly.selector, id, 1300));
        reg.settle(id); // B has not revealed
        _reveal(id, B, "r");
        assertTrue(reg.everyoneRevealed(id), "every seat revealed");
        reg.settle(id);
        assertEq(uint256(reg.job(id).status), uint256(JobRegistry.Status.Settled), "settled at 1050, not 1300");
        assertEq(reg.owed(A) + reg.owed(B), 2 * STAKE + PAY, "both paid");
        vm.prank(C);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.JoinClosed.selector, id));
        reg.join{value: STAKE}(id);
        _balanced();
    }

    /// After the join deadline the seats taken are all there will be: once they are sealed the
    /// reveal opens, and a job whose claims differ is disputed early; a revealed trainer's
    /// second reveal then names the status.
    function test_after_the_join_deadline_the_seats_taken_are_everyone() public {
        uint256 id = _post(3);
        _enter(id, A, "honest");
        _enter(id, B, "other");
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.RevealNotOpen.selector, id, 1200, 1300));
        reg.reveal(id, "honest", bytes32(uint256(uint160(A)))); // before the join deadline: C may join
        vm.warp(1100); // the join deadline: two seats of three taken, both sealed
        _reveal(id, A, "honest");
        _reveal(id, B, "other");
        reg.settle(id);
        assertEq(uint256(reg.job(id).status), uint256(JobRegistry.Status.Disputed), "disputed at 1100");
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.WrongStatus.selector, id, JobRegistry.Status.Disputed));
        reg.reveal(id, "honest", bytes32(uint256(uint160(A))));
        vm.prank(GAME);
        reg.decide(id, A, B);
        reg.settle(id);
        assertEq(reg.owed(A), 2 * STAKE + PAY, "the winner takes all");
        _balanced();
    }

    /// A seat taken and never sealed keeps the reveal closed until the commit deadline, and the
    /// job unsettled until the reveal deadline: that trainer may still commit (and reveal) in time.
    function test_an_unsealed_seat_keeps_the_windows_to_their_deadlines() public {
        uint256 id = _post(2);
        _enter(id, A, "r");
        vm.prank(B);
        reg.join{value: STAKE}(id);
        vm.warp(1150);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.RevealNotOpen.selector, id, 1200, 1300));
        reg.reveal(id, "r", bytes32(uint256(uint160(A))));
        vm.warp(1200);
        _reveal(id, A, "r");
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.TooEarly.selector, id, 1300));
        reg.settle(id);
        vm.warp(1300);
        reg.settle(id);
        assertEq(reg.owed(A), 2 * STAKE + PAY, "B forfeits for never revealing");
        _balanced();
    }

    /// A job nobody joined is refundable once joining is over, not at the reveal deadline.
    function test_a_job_nobody_joined_is_refunded_after_the_join_deadline() public {
        uint256 id = _post(2);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.TooEarly.selector, id, 1300));
        reg.settle(id);
        vm.warp(1100);
        reg.settle(id);
        assertEq(reg.owed(CLIENT), PAY, "the payment back");
        _balanced();
    }

    function test_a_job_nobody_delivers_refunds_the_client() public {
        uint256 id = _post(2);
        _enter(id, A, "r");
        vm.warp(1300);
        reg.settle(id);
        assertEq(reg.owed(CLIENT), PAY + STAKE, "payment back plus the no-show's stake");
        _balanced();
    }

    function test_disputes_are_decided_by_the_game_only_and_the_winner_takes_all() public {
        uint256 id = _threeSettled([A, B, C], [bytes32("honest"), "lazy", "corrupt"]);
        assertEq(uint256(reg.job(id).status), uint256(JobRegistry.Status.Disputed), "disputed");
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.OnlyGame.selector, address(this)));
        reg.decide(id, A, B);
        vm.prank(GAME);
        reg.decide(id, A, B);
        assertEq(uint256(reg.job(id).status), uint256(JobRegistry.Status.Open), "open for settle");
        assertEq(reg.owed(A), 0, "nothing is paid before settle");
        reg.settle(id);
        assertEq(uint256(reg.job(id).status), uint256(JobRegistry.Status.Disputed), "C still disagrees");
        vm.prank(GAME);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.NotRequested.selector, B, C));
        reg.decide(id, B, C); // B is out: no double decision, and only the requested match counts
        vm.prank(GAME);
        reg.decide(id, A, C);
        reg.settle(id);
        assertEq(uint256(reg.job(id).status), uint256(JobRegistry.Status.Settled), "settled");
        assertEq(reg.owed(A), 3 * STAKE + PAY, "A: its stake, both losers' stakes, the payment");
        assertEq(reg.owed(B) + reg.owed(C), 0, "losers get nothing");
        _balanced();
    }

    /// A claim revealed in one job is public: an identical job posted later would pay a trainer
    /// that replays it without training (issue #42). Refused, naming the earlier job.
    function test_a_spec_revealed_in_an_earlier_job_cannot_be_posted_again() public {
        uint256 id = _post(1);
        _enter(id, A, "r");
        vm.warp(1250);
        _reveal(id, A, "r");
        vm.roll(block.number + 1);
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.SpecRevealedBefore.selector, SPEC, id));
        reg.post{value: PAY}(_terms(1));
        address[] memory only = new address[](1);
        only[0] = B;
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.SpecRevealedBefore.selector, SPEC, id));
        reg.postFor{value: PAY}(_terms(1), only);
        JobRegistry.Terms memory t = _terms(1);
        t.specHash = bytes32(uint256(0x5bed)); // another seed: another computation
        vm.prank(CLIENT);
        reg.post{value: PAY}(t);
    }

    /// The replay guard is no front-runner's veto: a client's post whose spec was first revealed in
    /// its own block (a front-runner that saw it pending posted the spec, sealed and revealed junk
    /// in one transaction ahead of it, the early window open at once) still goes through, and its
    /// honest trainer is paid; a post in a later block is refused as before.
    function test_a_spec_revealed_in_the_same_block_does_not_block_the_clients_post() public {
        FrontRunner f = new FrontRunner();
        JobRegistry.Terms memory t = _terms(1);
        f.run{value: 1 + STAKE}(reg, t);
        assertEq(reg.revealedIn(SPEC), 1, "revealed in the front-runner's job");
        assertEq(address(f).balance, 1 + STAKE, "it paid only gas");
        vm.prank(CLIENT);
        uint256 id = reg.post{value: PAY}(t); // same block
        _enter(id, A, "r");
        _reveal(id, A, "r");
        reg.settle(id);
        assertEq(reg.owed(A), STAKE + PAY, "the honest trainer paid");
        vm.roll(block.number + 1);
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.SpecRevealedBefore.selector, SPEC, 1));
        reg.post{value: PAY}(t);
        _balanced();
    }

    /// A job that got no reveal (nobody joined, or nobody revealed) may be posted again.
    function test_a_spec_never_revealed_may_be_posted_again() public {
        uint256 id = _post(1);
        _enter(id, A, "r"); // joins and commits, never reveals
        vm.warp(1300);
        reg.settle(id);
        assertEq(reg.owed(CLIENT), PAY + STAKE, "refunded");
        assertEq(reg.revealedIn(SPEC), 0, "nothing revealed");
        _post(1);
    }

    function test_a_chunk_above_max_chunk_is_refused() public {
        JobRegistry.Terms memory t = _terms(1);
        t.chunk = reg.MAX_CHUNK() + 1;
        vm.prank(CLIENT);
        vm.expectRevert(
            abi.encodeWithSelector(JobRegistry.BadTerms.selector, "chunk above MAX_CHUNK: its moves would not fit a block")
        );
        reg.post{value: PAY}(t);
        t.chunk = reg.MAX_CHUNK();
        vm.prank(CLIENT);
        reg.post{value: PAY}(t);
    }

    function test_terms_below_the_floors_are_refused() public {
        JobRegistry.Terms memory t = _terms(2);
        t.clock = 599;
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.BelowFloor.selector, "clock", 599, 600));
        reg.post{value: PAY}(t);
        t = _terms(2);
        t.commitBy = t.joinBy + 99;
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.BelowFloor.selector, "commit window", 99, 100));
        reg.post{value: PAY}(t);
        t = _terms(2);
        t.revealBy = t.commitBy + 1;
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.BelowFloor.selector, "reveal window", 1, 100));
        reg.post{value: PAY}(t);
    }

    function test_a_restricted_job_takes_only_the_named_trainers() public {
        address[] memory only = new address[](2);
        (only[0], only[1]) = (A, C);
        vm.prank(CLIENT);
        uint256 id = reg.postFor{value: PAY}(_terms(3), only);
        _enter(id, A, "r");
        vm.prank(B);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.NotApproved.selector, id, B));
        reg.join{value: STAKE}(id);
        _enter(id, C, "r");
        assertEq(reg.trainers(id).length, 2, "A and C only");
    }

    /// @dev Two colluders with different wrong claims and the honest A: the colluders' side
    /// match pays its winner nothing; once A beats it, A holds every stake.
    function test_a_coalition_loses_every_stake_even_after_a_side_match() public {
        uint256 id = _threeSettled([B, C, A], [bytes32("wrong-1"), "wrong-2", "honest"]);
        (address x, address y) = reg.requested(id);
        assertTrue(x == B && y == C, "the colluders' pair is asked for first");
        vm.prank(GAME);
        reg.decide(id, B, C); // the side match
        reg.settle(id);
        assertEq(reg.owed(B), 0, "a side match moves nothing into the winner's pocket");
        vm.prank(GAME);
        reg.decide(id, A, B);
        reg.settle(id);
        assertEq(reg.owed(A), 3 * STAKE + PAY, "A: its stake, both colluders' stakes, the payment");
        _balanced();
    }

    function test_a_draw_puts_both_stakes_in_the_pot() public {
        uint256 id = _threeSettled([B, C, A], [bytes32("wrong-1"), "wrong-2", "honest"]);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.OnlyGame.selector, address(this)));
        reg.draw(id, B, C);
        vm.prank(GAME);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.NotRequested.selector, A, B));
        reg.draw(id, A, B);
        vm.prank(GAME);
        reg.draw(id, C, B);
        reg.settle(id);
        assertEq(uint256(reg.job(id).status), uint256(JobRegistry.Status.Settled), "A alone is left");
        assertEq(reg.owed(A), 3 * STAKE + PAY, "A takes the pot");
        _balanced();
    }

    function _faultClaim(uint32 step, bytes32 trace) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x06), sha256(abi.encodePacked(bytes1(0x0a), step)), trace));
    }

    /// @dev Issue #42: A and B's runs fault at step 10 of 40 (A reveals it as a fault, B with a
    /// plain reveal of the same claim); C's result loses its match. Accepted, the fault returns
    /// A's and B's stakes and pays them C's stake and the pay for 10 steps; the client gets the
    /// pay for the other 30 back; nothing is held (a registry with a delivery window).
    function test_an_accepted_fault_claim_pays_for_the_steps_done_and_refunds_the_rest() public {
        reg = new JobRegistry(GAME, 600, 100, 100, 500, 100, 0.01 ether);
        bytes32 f = _faultClaim(10, "trace");
        uint256 id = _post(3);
        _enter(id, A, f);
        _enter(id, B, f);
        _enter(id, C, "result");
        vm.warp(1250);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.BadTerms.selector, "fault step"));
        reg.revealFault(id, 40, "trace", bytes32(uint256(uint160(A))));
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.SealMismatch.selector, A));
        reg.revealFault(id, 11, "trace", bytes32(uint256(uint160(A)))); // another step is another claim
        vm.prank(A);
        reg.revealFault(id, 10, "trace", bytes32(uint256(uint160(A))));
        assertEq(reg.faultAt(id, A), 11, "the step, plus one");
        _reveal(id, B, f);
        _reveal(id, C, "result");
        vm.warp(1300);
        reg.settle(id);
        vm.prank(GAME);
        reg.decide(id, A, C);
        reg.settle(id);
        uint256 paid = PAY * 10 / 40;
        assertEq(reg.owed(A), STAKE + (STAKE + paid) / 2, "A: its stake, half of C's and of the pay for 10 steps");
        assertEq(reg.owed(B), STAKE + (STAKE + paid) / 2, "B too (it revealed the same claim)");
        assertEq(reg.owed(CLIENT), PAY - paid, "the client: the pay for the 30 steps not done");
        assertEq(reg.owed(C), 0, "the loser");
        (uint128 held,,,,) = reg.holds(id, A);
        assertEq(held, 0, "a fault has no model to deliver: nothing held");
        _balanced();
    }

    /// @dev A match that reaches a node the chain cannot settle: both out, both stakes back, no
    /// loss for either; the job goes on without them (A alone is accepted).
    function test_an_unsettleable_match_returns_both_stakes() public {
        uint256 id = _threeSettled([B, C, A], [bytes32("wrong-1"), "wrong-2", "honest"]);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.OnlyGame.selector, address(this)));
        reg.unsettleable(id, B, C);
        vm.prank(GAME);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.NotRequested.selector, A, B));
        reg.unsettleable(id, A, B);
        vm.prank(GAME);
        reg.unsettleable(id, C, B);
        assertEq(reg.owed(B), STAKE, "B's stake back");
        assertEq(reg.owed(C), STAKE, "C's stake back");
        reg.settle(id);
        assertEq(uint256(reg.job(id).status), uint256(JobRegistry.Status.Settled), "A alone is left");
        assertEq(reg.owed(A), STAKE + PAY, "A: its stake and the payment (no pot)");
        _balanced();
    }

    function test_settle_cannot_be_replayed_while_a_match_is_asked_for() public {
        uint256 id = _post(2);
        _enter(id, A, "honest");
        _enter(id, B, "wrong");
        vm.warp(1250);
        _reveal(id, A, "honest");
        _reveal(id, B, "wrong");
        vm.warp(1300);
        reg.settle(id);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.WrongStatus.selector, id, JobRegistry.Status.Disputed));
        reg.settle(id);
    }

    function test_reentrant_withdraw_cannot_take_twice_and_loses_nothing() public {
        Reenterer r = new Reenterer(reg);
        vm.deal(address(r), 0);
        uint256 id = _post(1);
        vm.deal(address(this), 2 ether);
        r.joinAndCommit{value: STAKE}(id, reg.sealOf(SPEC, address(r), "r", "s"));
        vm.warp(1250);
        r.reveal(id, "r", "s");
        vm.warp(1300);
        reg.settle(id);
        uint256 due = reg.owed(address(r));
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.TransferFailed.selector, address(r), due));
        r.withdraw(true);
        assertEq(reg.owed(address(r)), due, "still owed after the failed attack");
        r.withdraw(false);
        assertEq(address(r).balance, due, "paid once");
        _balanced();
    }
}

/// @dev The accepted result of the delivery tests: one state tensor, float32 [2K] in K chunks of 2.
abstract contract TinyResult {
    uint256 internal constant K = 16;
    uint256 internal constant DEPTH = 4;
    bytes32 internal constant TRACE = bytes32(uint256(0x7ace));

    function _chunkBytes(uint256 k) internal pure returns (bytes memory) {
        return abi.encodePacked(uint64(k + 1)); // two float32 words
    }

    function _leaves() internal pure returns (bytes32[] memory l) {
        l = new bytes32[](K);
        for (uint256 k; k < K; ++k) l[k] = Merkle.leaf(_chunkBytes(k));
    }

    /// @dev The siblings of leaf k from the bottom up, and the top, of a tree of K leaves.
    function _path(uint256 k) internal pure returns (bytes32[] memory p, bytes32 top) {
        bytes32[] memory level = _leaves();
        p = new bytes32[](DEPTH);
        for (uint256 d; d < DEPTH; ++d) {
            p[d] = level[k ^ 1];
            bytes32[] memory up = new bytes32[](level.length / 2);
            for (uint256 i; i < up.length; ++i) up[i] = Merkle.inner(level[2 * i], level[2 * i + 1]);
            (level, k) = (up, k >> 1);
        }
        top = level[0];
    }

    function _commitment() internal pure returns (bytes32) {
        (, bytes32 top) = _path(0);
        return sha256(abi.encodePacked(bytes1(0x03), uint8(1), uint8(1), uint64(2 * K), Merkle.seal(K, top)));
    }

    function _stateRoot() internal pure returns (bytes32) {
        return Merkle.seal(1, Merkle.leaf(abi.encodePacked(_commitment())));
    }

    function _claim() internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x06), _stateRoot(), TRACE));
    }

    /// @dev Chunks first .. first + count - 1 (a chunk past the end: the last one), proven.
    function _delivered(uint256 first, uint256 count) internal pure returns (JobRegistry.Delivered memory d) {
        (d.stateRoot, d.traceRoot, d.commitment) = (_stateRoot(), TRACE, _commitment());
        d.chunks = new Tensors.ElementProof[](count);
        uint64[] memory shape = new uint64[](1);
        shape[0] = uint64(2 * K);
        for (uint256 i; i < count; ++i) {
            uint256 k = first + i < K ? first + i : K - 1;
            (bytes32[] memory p,) = _path(k);
            d.chunks[i] = Tensors.ElementProof(1, shape, 2, 2 * k, _chunkBytes(k), p);
        }
    }

    function _tinyTerms(bytes32 spec, uint256 start) internal pure returns (JobRegistry.Terms memory) {
        return JobRegistry.Terms(spec, 0, 0, 0, 0, 0, 5, 1, 10, 2, 2, 3, 1 ether, uint64(start + 10),
            uint64(start + 20), uint64(start + 30), 60);
    }
}

/// @dev The client's remedy (issue #42): bonds per challenged chunk, answers in order, and a
/// withholder that answers part of what was asked loses its hold.
contract DeliveryTest is Test, TinyResult {
    JobRegistry internal reg;
    address internal constant CLIENT = address(0xC11E);
    address internal constant A = address(0xA11CE);
    address internal constant B = address(0xB0B);
    uint256 internal constant PAY = 3 ether;
    uint256 internal constant BOND = 0.01 ether;
    uint256 internal constant SHARE = 1 ether + PAY / 2;
    uint256 internal id;

    function setUp() public {
        reg = new JobRegistry(address(0x6A3E), 60, 10, 10, 1000, 100, BOND); // held 1000 s, 100 s per challenge
        vm.warp(1000);
        vm.deal(CLIENT, 100 ether);
        vm.prank(CLIENT);
        id = reg.post{value: PAY}(_tinyTerms("tiny", block.timestamp));
        address[2] memory who = [A, B];
        for (uint256 i; i < 2; ++i) {
            vm.deal(who[i], 1 ether);
            vm.prank(who[i]);
            reg.join{value: 1 ether}(id);
            bytes32 s = reg.sealOf("tiny", who[i], _claim(), "s");
            vm.prank(who[i]);
            reg.commit(id, s);
        }
        vm.warp(1025);
        bytes32 claim = _claim(); // (sha256 is a call: made before the prank)
        for (uint256 i; i < 2; ++i) {
            vm.prank(who[i]);
            reg.reveal(id, claim, "s");
        }
        vm.warp(1030);
        reg.settle(id);
    }

    function _challenge(address t, uint32 first, uint32 count) internal {
        vm.prank(CLIENT);
        reg.challenge{value: count * BOND}(id, t, 0, first, count);
    }

    function _balanced() internal view {
        assertEq(address(reg).balance, reg.escrow() + reg.totalOwed(), "balance == escrow + owed");
    }

    function test_a_withholder_that_answers_eight_of_sixteen_chunks_loses_its_hold() public {
        _challenge(B, 0, 16); // the client verified nothing it got: it asks for every chunk
        reg.answer(id, B, _delivered(0, 4));
        reg.answer(id, B, _delivered(4, 4)); // 8 answered; it withholds the rest
        (,, uint32 answered, uint32 done, uint32 pending) = reg.holds(id, B);
        assertEq(answered * 100 + done * 10 + pending, 88, "0 answered in full, 8 done, 8 pending");
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.ChallengeOpen.selector, id, B, 1130));
        reg.close(id, B);
        vm.warp(1130);
        JobRegistry.Delivered memory rest = _delivered(8, 8);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.AnswerLate.selector, id, 1130));
        reg.answer(id, B, rest);
        vm.warp(3000); // the window's end pays nobody while a chunk is unanswered
        reg.close(id, B);
        assertEq(reg.owed(B), 8 * BOND, "the withholder keeps only the bonds of what it answered");
        assertEq(reg.owed(CLIENT), SHARE + 8 * BOND, "the client: its hold and the unanswered bonds");
        vm.prank(A);
        reg.close(id, A);
        assertEq(reg.owed(A), SHARE, "the other accepted trainer is paid");
        _balanced();
    }

    function test_bonds_pay_the_answers_and_challenges_queue_in_order() public {
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.WrongBond.selector, BOND, 2 * BOND));
        reg.challenge{value: BOND}(id, A, 0, 0, 2);
        vm.prank(CLIENT);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.BadRange.selector, 65, 64));
        reg.challenge{value: 65 * BOND}(id, A, 0, 0, 65);
        vm.deal(A, BOND);
        vm.prank(A);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.NotClient.selector, A));
        reg.challenge{value: BOND}(id, A, 0, 0, 1);
        _challenge(A, 3, 2);
        _challenge(A, 14, 5); // 14, 15 and three past the end
        (,,, uint64 due) = reg.asks(id, A, 1);
        assertEq(due, 1230, "each challenge is due an answer window after the one before");
        JobRegistry.Delivered memory d = _delivered(4, 1); // (built before expectRevert: sha256 is a call)
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.NotTheResult.selector, "not the chunk asked"));
        reg.answer(id, A, d); // in order
        d = _delivered(3, 3);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.MoreThanAsked.selector, id, A));
        reg.answer(id, A, d);
        reg.answer(id, A, _delivered(3, 2));
        assertEq(reg.owed(A), 2 * BOND, "a bond per answered chunk");
        vm.warp(1150); // past the first deadline, inside the second
        reg.answer(id, A, _delivered(14, 3)); // 14, 15, then the last chunk: nothing past it exists
        assertEq(reg.owed(A), 7 * BOND, "every bond");
        d = _delivered(0, 1);
        vm.expectRevert(abi.encodeWithSelector(JobRegistry.NoChallenge.selector, id, A));
        reg.answer(id, A, d);
        vm.prank(CLIENT);
        reg.close(id, A); // the client has its model
        assertEq(reg.owed(A), SHARE + 7 * BOND, "hold and bonds");
        _balanced();
    }
}

/// @dev Random sequences of every action; the registry's books always balance.
contract RegistryHandler is TinyResult {
    JobRegistry public reg;
    address internal constant GAME = address(0x6A3E);
    address[3] internal actors = [address(0xA1), address(0xA2), address(0xA3)];
    Vm2 internal constant vm = Vm2(address(uint160(uint256(keccak256("hevm cheat code")))));
    uint256 internal job;
    bytes32 internal spec;
    uint256 internal clock = 1000; // the fuzzer's calls do not keep a warp: each action sets it again

    constructor(JobRegistry r) {
        reg = r;
    }

    modifier timed() {
        vm.warp(clock);
        _;
    }

    /// @dev The tiny result (answers verify), another result, or a fault at step 3 of the 10.
    function _claimOf(uint256 claim) internal pure returns (bytes32) {
        if (claim % 3 == 0) return _claim();
        if (claim % 3 == 1) return bytes32(uint256(2));
        return sha256(abi.encodePacked(bytes1(0x06), sha256(abi.encodePacked(bytes1(0x0a), uint32(3))), bytes32("t")));
    }

    function post(uint256 pay) external timed {
        pay = 1 + pay % 10 ether;
        vm.deal(address(this), pay);
        spec = keccak256(abi.encode(spec)); // a fresh spec: a revealed one cannot be posted again
        job = reg.post{value: pay}(_tinyTerms(spec, block.timestamp));
    }

    function join(uint256 who, uint256 claim) external timed {
        address a = actors[who % 3];
        vm.deal(a, 1 ether);
        vm.prank(a);
        try reg.join{value: 1 ether}(job) {} catch {}
        bytes32 s = reg.sealOf(spec, a, _claimOf(claim), "s");
        vm.prank(a);
        try reg.commit(job, s) {} catch {}
    }

    function reveal(uint256 who, uint256 claim) external timed {
        bytes32 c = _claimOf(claim); // (sha256 is a call: made before the prank)
        vm.prank(actors[who % 3]);
        if (claim % 3 < 2) {
            try reg.reveal(job, c, "s") {} catch {}
        } else {
            try reg.revealFault(job, 3, "t", "s") {} catch {} // the fault claim of _claimOf
        }
    }

    function unsettleable(uint256 a, uint256 b) external timed {
        vm.prank(GAME);
        try reg.unsettleable(job, actors[a % 3], actors[b % 3]) {} catch {}
    }

    function wait(uint256 dt) external {
        clock += dt % 15;
    }

    function settle() external timed {
        try reg.settle(job) {} catch {}
    }

    function challenge(uint256 who, uint32 first, uint32 count) external timed {
        (first, count) = (first % 20, 1 + count % 8);
        vm.deal(address(this), address(this).balance + count * reg.bond());
        // as the client (this handler posts); a bond per chunk
        try reg.challenge{value: count * reg.bond()}(job, actors[who % 3], 0, first, count) {} catch {}
    }

    function answer(uint256 who, uint256 n) external timed {
        address t = actors[who % 3];
        (, uint32 asked, uint32 answered, uint32 done,) = reg.holds(job, t);
        if (answered == asked) return;
        (, uint32 first,,) = reg.asks(job, t, answered);
        try reg.answer(job, t, _delivered(first + done, 1 + n % 4)) {} catch {}
    }

    function close(uint256 who, bool asClient) external timed {
        if (!asClient) vm.prank(actors[(who + 1) % 3]);
        try reg.close(job, actors[who % 3]) {} catch {}
    }

    function decide(uint256 w, uint256 l) external timed {
        vm.prank(GAME);
        try reg.decide(job, actors[w % 3], actors[l % 3]) {} catch {}
    }

    function draw(uint256 a, uint256 b) external timed {
        vm.prank(GAME);
        try reg.draw(job, actors[a % 3], actors[b % 3]) {} catch {}
    }

    function withdraw(uint256 who) external timed {
        vm.prank(actors[who % 3]);
        try reg.withdraw() {} catch {}
    }

    receive() external payable {}
}

interface Vm2 {
    function deal(address who, uint256 balance) external;
    function prank(address sender) external;
    function warp(uint256 timestamp) external;
}

contract RegistryInvariantTest is Test {
    JobRegistry internal reg;
    RegistryHandler internal handler;

    function setUp() public {
        reg = new JobRegistry(address(0x6A3E), 60, 10, 10, 20, 10, 0.01 ether); // pay held 20 s for delivery
        handler = new RegistryHandler(reg);
        handler.post(1 ether);
    }

    function targetContracts() public view returns (address[] memory t) {
        t = new address[](1);
        t[0] = address(handler);
    }

    /// forge-config: default.invariant.runs = 64
    /// forge-config: default.invariant.depth = 40
    function invariant_books_balance() public view {
        assertEq(address(reg).balance, reg.escrow() + reg.totalOwed(), "balance == escrow + owed");
    }
}
