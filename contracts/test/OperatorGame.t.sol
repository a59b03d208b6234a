// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "./Cheats.sol";
import {OperatorGame, IDisputeGame} from "../OperatorGame.sol";
import {Executor} from "../Executor.sol";
import {JobRegistry} from "../JobRegistry.sol";
import {Merkle} from "../lib/Merkle.sol";

/// @dev Stands in for JobRegistry: the one view OperatorGame reads (anchor).
contract StubRegistry {
    bytes32 public kernelRoot;
    uint256 public chunk;

    constructor(bytes32 k, uint256 c) {
        (kernelRoot, chunk) = (k, c);
    }

    function anchor(uint256, uint8) external view returns (bytes32, uint256, uint256, uint256) {
        return (kernelRoot, 1, 1, chunk); // one node in the step, one state tensor
    }
}

/// @dev Stands in for DisputeGame: hands a match over and records the decision.
contract StubGame {
    address public registry;
    OperatorGame public ops;
    bool public decided;
    uint256 public winner;
    string public reason;

    function setUp(address r, OperatorGame o) external {
        (registry, ops) = (r, o);
    }

    function start(address a, address b) external {
        ops.start(1, [a, b], 1, 0, [uint64(3600), uint64(3600)], [uint96(0), uint96(0)]);
    }

    function nodeLeaves(uint256) external pure returns (bytes32[2] memory) {
        return [bytes32(0), bytes32(0)];
    }

    function decideOperator(uint256, uint256 w, uint8, string calldata why) external {
        (decided, winner, reason) = (true, w, why);
    }
}

/// @notice OperatorGame level 4 on an EMPTY disputed tensor (0 elements, 0 chunks): no chunk
/// can be opened, so the openings decide. The honest commitment of an empty tensor
/// (offchain/protocol/tensors.commit) seals the empty tree's top ZERO; a cheater committing the
/// same empty tensor with another top (leaf("")) once won at the chunk, where no 0-byte chunk
/// hashes to ZERO. Now the party whose empty tensor's top is not ZERO loses, in either seat.
/// And the kernel count of postKernelTop decodes as the uint32 its proof hashes.
contract OperatorGameTest is Test {
    bytes32 internal constant ZERO = bytes32(0);
    address[2] internal seats = [address(0xA11CE), address(0xB0B)];

    StubGame internal game;
    OperatorGame internal ops;

    // kernel 0: copy of an empty f32 view [0] (source 0: the node's input); kernel 1: copy again
    function _view0() internal pure returns (bytes memory) {
        // VIEW u16 source || i64 offset || u8 ndim || (u64 size, i64 stride)
        return abi.encodePacked(uint8(0), uint16(0), uint64(0), uint8(1), uint64(0), uint64(1));
    }

    function _structure() internal pure returns (bytes memory) {
        return abi.encodePacked(uint8(0x09), uint32(4), "copy", uint16(1), _view0());
    }

    function _kernel(bytes32 operand, bytes32 output) internal pure returns (bytes memory) {
        return abi.encodePacked(uint8(0x08), uint32(4), "copy", uint16(1), _view0(), operand, output);
    }

    function _header() internal pure returns (bytes memory) {
        return abi.encodePacked(uint8(0x03), uint8(1), uint8(1), uint64(0)); // f32, 1 dim, [0]
    }

    function _commit(bytes32 top) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(_header(), Merkle.seal(0, top)));
    }

    bytes32 internal structRoot;
    bytes32 internal sl;
    bytes[2] internal k0;
    bytes internal k1;

    /// @dev A match of one node of two kernels, in the kernel tops phase.
    function _deploy() internal {
        bytes memory st = _structure();
        sl = Merkle.leaf(st);
        structRoot = Merkle.seal(2, Merkle.inner(sl, sl));
        bytes32 kernelRoot = Merkle.seal(1, Merkle.leaf(abi.encodePacked(uint32(2), structRoot)));
        game = new StubGame();
        StubRegistry reg = new StubRegistry(kernelRoot, 64);
        ops = new OperatorGame(IDisputeGame(address(game)), new Executor());
        game.setUp(address(reg), ops);
        game.start(seats[0], seats[1]);
    }

    /// @dev Both seats at level 4 on kernel 0's output: `cheater`'s is the empty tensor
    /// committed with top leaf(""), the other's as tensors.commit does.
    function _toTensorTop(uint256 cheater) internal {
        _deploy();
        bytes32 input = keccak256("the node's input, agreed");
        k1 = _kernel(input, keccak256("kernel 1's output, the same for both"));
        k0[1 - cheater] = _kernel(input, _commit(ZERO));
        k0[cheater] = _kernel(input, _commit(Merkle.leaf("")));
        bytes32[] memory none = new bytes32[](0);
        bytes32[][2] memory kids;
        bytes32[2] memory tops;
        for (uint256 p; p < 2; ++p) {
            kids[p] = new bytes32[](2);
            (kids[p][0], kids[p][1]) = (Merkle.leaf(k0[p]), Merkle.leaf(k1));
            tops[p] = Merkle.inner(kids[p][0], kids[p][1]); // (before a prank: sha256 is a call)
        }
        for (uint256 p; p < 2; ++p) {
            vm.prank(seats[p]);
            ops.postKernelTop(1, tops[p], 2, structRoot, none);
        }
        vm.prank(seats[0]);
        ops.postChildren(1, kids[0], none);
        vm.prank(seats[1]);
        ops.postChildren(1, kids[1], kids[0]);
        bytes32[] memory sp = new bytes32[](1);
        sp[0] = sl;
        vm.prank(seats[0]);
        ops.postKernel(1, k0[0], none, sp, OperatorGame.Posted("", none), "");
        vm.prank(seats[1]);
        ops.postKernel(1, k0[1], none, sp, OperatorGame.Posted(k0[0], none), "");
        (OperatorGame.Phase phase,,,,,) = ops.state(1);
        assertEq(uint256(phase), uint256(OperatorGame.Phase.TensorTop), "level 4: the output tensor is disputed");
    }

    function _check(uint256 cheater, uint256 firstToOpen) internal {
        _toTensorTop(cheater);
        bytes memory head = _header();
        bytes32[2] memory top;
        (top[cheater], top[1 - cheater]) = (Merkle.leaf(""), ZERO);
        vm.prank(seats[firstToOpen]);
        ops.postTensorTop(1, head, top[firstToOpen]);
        if (firstToOpen != cheater) {
            assertTrue(!game.decided(), "the honest opening is accepted");
            vm.prank(seats[cheater]);
            ops.postTensorTop(1, head, top[cheater]);
        }
        assertTrue(game.decided(), "decided at the cheater's opening");
        assertEq(game.winner(), 1 - cheater, "the honest party wins");
    }

    function test_an_empty_tensor_whose_top_is_not_the_empty_trees_loses() public {
        _check(1, 0);
        _check(1, 1);
        _check(0, 0);
        _check(0, 1);
    }

    /// @dev The kernel count is proven as the leaf's uint32: count + 2**32 (which passed the
    /// proof when the parameter was a uint64, and ran the descent over a 33-level tree the
    /// honest party could not answer below its own leaves) does not decode.
    function test_a_kernel_count_wider_than_the_leafs_uint32_is_refused() public {
        _deploy();
        bytes32[] memory none = new bytes32[](0);
        bytes memory wide = abi.encodeWithSelector(OperatorGame.postKernelTop.selector, uint256(1), bytes32(uint256(7)),
                                                   uint256(2) + (uint256(1) << 32), structRoot, none);
        vm.prank(seats[1]);
        (bool ok,) = address(ops).call(wide);
        assertTrue(!ok, "count + 2**32 refused");
        vm.prank(seats[1]);
        ops.postKernelTop(1, bytes32(uint256(7)), 2, structRoot, none); // the job's count is taken
    }
}
