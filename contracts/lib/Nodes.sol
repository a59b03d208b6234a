// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Reading the node and structure encodings of docs/PROTOCOL.md §4
/// @dev node      = 0x04 || H(structure) || u16 #in || in commitments || u16 #out || out commitments
///      fault node= 0x0D || H(structure) || u16 #in || in commitments || u32 kernel || u64 element
///                  (the node's decomposition faults there: it has no outputs)
///      structure = 0x05 || u32 len op || op || u32 len attrs || attrs || u16 #refs || refs (7 bytes:
///                  u8 kind, u32 index, u16 slot)
library Nodes {
    error NotANode();
    error NotAStructure();
    error NoSuchInput(uint256 i, uint256 count);
    error NoSuchOutput(uint256 slot, uint256 count);
    error NoSuchRef(uint256 i, uint256 count);

    uint8 internal constant NODE_OUT = 0;
    uint8 internal constant STATE = 1;
    uint8 internal constant DATA = 2;

    function _u16(bytes memory b, uint256 o) private pure returns (uint256) {
        return uint256(uint8(b[o])) << 8 | uint256(uint8(b[o + 1]));
    }

    function _u32(bytes memory b, uint256 o) private pure returns (uint256) {
        return uint256(uint8(b[o])) << 24 | uint256(uint8(b[o + 1])) << 16 | uint256(uint8(b[o + 2])) << 8
            | uint256(uint8(b[o + 3]));
    }

    function _word(bytes memory b, uint256 o) private pure returns (bytes32 w) {
        assembly ("memory-safe") {
            w := mload(add(add(b, 32), o))
        }
    }

    /// @dev Checks the tag and the exact length; returns (#inputs, offset of #outputs, or of
    /// the fault's kernel in a fault node).
    function _shape(bytes memory node) private pure returns (uint256 nin, uint256 outAt) {
        if (node.length < 37) revert NotANode();
        nin = _u16(node, 33);
        outAt = 35 + 32 * nin;
        if (node[0] == 0x0D) {
            if (node.length != outAt + 12) revert NotANode();
        } else if (node[0] != 0x04 || node.length < outAt + 2 || node.length != outAt + 2 + 32 * _u16(node, outAt)) {
            revert NotANode();
        }
    }

    /// @dev A fault node's (kernel, element) packed as (kernel + 1) << 64 | element; 0 for a node
    /// with outputs.
    function fault(bytes memory node) internal pure returns (uint96) {
        (, uint256 at) = _shape(node);
        if (node[0] != 0x0D) return 0;
        return uint96((_u32(node, at) + 1) << 64 | uint256(_word(node, at + 4)) >> 192);
    }

    function structureHash(bytes memory node) internal pure returns (bytes32) {
        _shape(node);
        return _word(node, 1);
    }

    function input(bytes memory node, uint256 i) internal pure returns (bytes32) {
        (uint256 nin,) = _shape(node);
        if (i >= nin) revert NoSuchInput(i, nin);
        return _word(node, 35 + 32 * i);
    }

    function inputCount(bytes memory node) internal pure returns (uint256 nin) {
        (nin,) = _shape(node);
    }

    function output(bytes memory node, uint256 slot) internal pure returns (bytes32) {
        (, uint256 outAt) = _shape(node);
        uint256 nout = node[0] == 0x0D ? 0 : _u16(node, outAt);
        if (slot >= nout) revert NoSuchOutput(slot, nout);
        return _word(node, outAt + 2 + 32 * slot);
    }

    function outputCount(bytes memory node) internal pure returns (uint256) {
        (, uint256 outAt) = _shape(node);
        return node[0] == 0x0D ? 0 : _u16(node, outAt);
    }

    /// @dev keccak256 of the node's input commitments, packed (= abi.encodePacked of the list:
    /// they lie contiguous in the encoding).
    function inputsHash(bytes memory node) internal pure returns (bytes32 h) {
        (uint256 nin,) = _shape(node);
        assembly ("memory-safe") {
            h := keccak256(add(node, 67), mul(32, nin))
        }
    }

    /// @dev keccak256 of the node's output commitments, packed (0 for a fault node: it has none,
    /// and no list hashes to 0).
    function outputsHash(bytes memory node) internal pure returns (bytes32 h) {
        (, uint256 outAt) = _shape(node);
        if (node[0] == 0x0D) return 0;
        uint256 nout = _u16(node, outAt);
        assembly ("memory-safe") {
            h := keccak256(add(add(node, 34), outAt), mul(32, nout))
        }
    }

    /// @dev The offset of the first reference and their count; checks the exact length.
    function _refs(bytes memory s) private pure returns (uint256 o, uint256 n) {
        if (s.length < 11 || s[0] != 0x05) revert NotAStructure();
        o = 5 + _u32(s, 1);
        if (s.length < o + 6) revert NotAStructure();
        o += 4 + _u32(s, o);
        if (s.length < o + 2) revert NotAStructure();
        n = _u16(s, o);
        o += 2;
        if (s.length != o + 7 * n) revert NotAStructure();
    }

    function refCount(bytes memory s) internal pure returns (uint256 n) {
        (, n) = _refs(s);
    }

    /// @dev (kind, index, slot) of input reference i of a structure.
    function ref(bytes memory s, uint256 i) internal pure returns (uint8 kind, uint256 index, uint256 slot) {
        (uint256 o, uint256 n) = _refs(s);
        if (i >= n) revert NoSuchRef(i, n);
        o += 7 * i;
        return (uint8(s[o]), _u32(s, o + 1), _u16(s, o + 5));
    }

    /// @dev A bare 7-byte reference (the state map's leaves).
    function parseRef(bytes memory r) internal pure returns (uint8 kind, uint256 index, uint256 slot) {
        if (r.length != 7) revert NotAStructure();
        return (uint8(r[0]), _u32(r, 1), _u16(r, 5));
    }
}
