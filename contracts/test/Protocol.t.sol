// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "./Cheats.sol";
import {Merkle} from "../lib/Merkle.sol";
import {Nodes} from "../lib/Nodes.sol";
import {Tensors} from "../lib/Tensors.sol";

/// @dev The wire format on chain against tests/vectors/protocol.json (made by the Python side).
contract ProtocolVectorsTest is Test {
    string internal json;

    function setUp() public {
        json = vm.readFile("tests/vectors/protocol.json");
    }

    function _key(string memory a, uint256 i, string memory b) internal pure returns (string memory) {
        return string.concat(a, "[", vm_toString(i), "]", b);
    }

    function vm_toString(uint256 v) internal pure returns (string memory s) {
        if (v == 0) return "0";
        bytes memory b;
        while (v > 0) {
            b = abi.encodePacked(bytes1(uint8(48 + v % 10)), b);
            v /= 10;
        }
        s = string(b);
    }

    function test_merkle_vectors() public view {
        uint256[8] memory sizes = [uint256(1), 2, 3, 4, 5, 7, 8, 9];
        for (uint256 c; c < sizes.length; ++c) {
            bytes[] memory data = vm.parseJsonBytesArray(json, _key(".merkle", c, ".data"));
            bytes32 root = vm.parseJsonBytes32(json, _key(".merkle", c, ".root"));
            assertEq(data.length, sizes[c], "vector size");
            for (uint256 i; i < data.length; ++i) {
                bytes32 lf = Merkle.leaf(data[i]);
                bytes32[] memory proof =
                    vm.parseJsonBytes32Array(json, string.concat(_key(".merkle", c, ".proofs"), "[", vm_toString(i), "]"));
                assertTrue(this.callVerify(root, data.length, i, lf, proof), "proof verifies");
                assertTrue(!this.callVerify(root, data.length + 1, i < data.length ? i : 0, lf, _pad(proof, data.length)), "n is sealed");
            }
        }
    }

    function _pad(bytes32[] memory proof, uint256 n) internal pure returns (bytes32[] memory out) {
        uint256 d = Merkle.depth(n + 1);
        out = new bytes32[](d);
        for (uint256 i; i < proof.length && i < d; ++i) out[i] = proof[i];
    }

    function test_tensor_vectors() public view {
        for (uint256 c; c < 4; ++c) {
            bytes32 commitment = vm.parseJsonBytes32(json, _key(".tensors", c, ".commitment"));
            uint256[] memory shapeU = vm.parseJsonUintArray(json, _key(".tensors", c, ".shape"));
            uint64[] memory shape = new uint64[](shapeU.length);
            for (uint256 i; i < shapeU.length; ++i) shape[i] = uint64(shapeU[i]);
            uint256 chunk = vm.parseJsonUint(json, _key(".tensors", c, ".chunk"));
            uint256 n = Tensors.numel(shape);
            for (uint256 i; i < n; ++i) {
                string memory pk = string.concat(_key(".tensors", c, ".proofs"), "[", vm_toString(i), "]");
                Tensors.ElementProof memory p = Tensors.ElementProof({
                    code: 1,
                    shape: shape,
                    chunk: chunk,
                    index: i,
                    chunkBytes: vm.parseJsonBytes(json, string.concat(pk, ".chunk")),
                    siblings: vm.parseJsonBytes32Array(json, string.concat(pk, ".siblings"))
                });
                assertTrue(this.verifies(commitment, p), "element proof verifies");
                bytes memory el = vm.parseJsonBytes(json, string.concat(pk, ".element"));
                uint256 w = uint256(uint8(el[0])) | uint256(uint8(el[1])) << 8 | uint256(uint8(el[2])) << 16
                    | uint256(uint8(el[3])) << 24;
                assertEq(this.wordOf(p), w, "element word");
                p.chunkBytes[0] ^= 0x01;
                assertTrue(!this.verifies(commitment, p), "a changed chunk fails");
            }
        }
    }

    function test_claim_vectors() public view {
        bytes32 s = vm.parseJsonBytes32(json, ".claims[0].state_root");
        bytes32 r = vm.parseJsonBytes32(json, ".claims[0].trace_root");
        assertEq(uint256(sha256(abi.encodePacked(bytes1(0x06), s, r))), uint256(vm.parseJsonBytes32(json, ".claims[0].claim")), "claim");
    }

    /// @dev The fault node (0x0D) reads as the node it is, with no outputs and its fault packed as
    /// OperatorGame keeps it; the fault claim and a faulting kernel's output as the games hash them.
    function test_fault_vectors() public view {
        bytes memory enc = vm.parseJsonBytes(json, ".faults[0].encoding");
        bytes memory plain = vm.parseJsonBytes(json, ".nodes[0].encoding");
        assertEq(uint256(Nodes.fault(enc)), vm.parseJsonUint(json, ".faults[0].packed"), "packed fault");
        assertEq(uint256(Nodes.fault(plain)), 0, "a node with outputs does not fault");
        assertEq(uint256(Nodes.structureHash(enc)), uint256(Nodes.structureHash(plain)), "structure hash");
        assertEq(uint256(Nodes.inputsHash(enc)), uint256(Nodes.inputsHash(plain)), "inputs");
        assertEq(Nodes.outputCount(enc), 0, "no outputs");
        assertEq(uint256(Nodes.outputsHash(enc)), 0, "outputs hash no list has");
        assertEq(uint256(Merkle.leaf(enc)), uint256(vm.parseJsonBytes32(json, ".faults[0].leaf")), "leaf");
        uint32 step = uint32(vm.parseJsonUint(json, ".faults[0].step"));
        bytes32 fs = sha256(abi.encodePacked(bytes1(0x0a), step));
        assertEq(uint256(fs), uint256(vm.parseJsonBytes32(json, ".faults[0].fault_state")), "fault state");
        bytes32 claim = sha256(abi.encodePacked(bytes1(0x06), fs, vm.parseJsonBytes32(json, ".faults[0].trace_root")));
        assertEq(uint256(claim), uint256(vm.parseJsonBytes32(json, ".faults[0].claim")), "fault claim");
        uint64 e = uint64(vm.parseJsonUint(json, ".faults[0].element"));
        assertEq(uint256(sha256(abi.encodePacked(bytes1(0x0e), e))), uint256(vm.parseJsonBytes32(json, ".faults[0].kernel_output")),
                 "FAULT(e)");
    }

    /// forge-config: default.fuzz.runs = 300
    function testFuzz_proof_with_a_wrong_length_reverts(uint256 n, uint256 len) public {
        n = bound(n, 2, 300);
        len = bound(len, 0, 12);
        if (len == Merkle.depth(n)) return;
        bytes32[] memory proof = new bytes32[](len);
        vm.expectRevert(abi.encodeWithSelector(Merkle.BadProofLength.selector, len, Merkle.depth(n)));
        this.callTop(n, 0, bytes32(0), proof);
    }

    /// @dev Merkle reads proofs from calldata: the tests call it through these.
    function callTop(uint256 n, uint256 i, bytes32 lf, bytes32[] calldata proof) external pure returns (bytes32) {
        return Merkle.top(n, i, lf, proof);
    }

    function callVerify(bytes32 root, uint256 n, uint256 i, bytes32 lf, bytes32[] calldata proof) external pure returns (bool) {
        return Merkle.verify(root, n, i, lf, proof);
    }

    /// @dev Tensors reads proofs from calldata (as the games get them): called through `this`.
    function verifies(bytes32 commitment, Tensors.ElementProof calldata p) external pure returns (bool) {
        return Tensors.verify(commitment, p);
    }

    function wordOf(Tensors.ElementProof calldata p) external pure returns (uint256) {
        return Tensors.word(p);
    }
}
