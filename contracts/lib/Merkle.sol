// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Merkle trees of docs/PROTOCOL.md §2 (SHA-256, domain-separated, root seals n)
/// @dev leaf = H(0x00 || data), inner = H(0x01 || l || r), root = H(0x02 || u64be(n) || top);
/// leaves padded with bytes32(0) to the next power of two; a proof lists depth(n) siblings
/// from the bottom up. Same vectors as the Python side (tests/vectors/protocol.json).
library Merkle {
    error IndexOutOfRange(uint256 index, uint256 n);
    error BadProofLength(uint256 got, uint256 want);

    function leaf(bytes memory data) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x00), data));
    }

    function inner(bytes32 l, bytes32 r) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x01), l, r));
    }

    function seal(uint256 n, bytes32 topHash) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x02), uint64(n), topHash));
    }

    function depth(uint256 n) internal pure returns (uint256 d) {
        while ((uint256(1) << d) < n) ++d;
    }

    /// @dev The top of an n-leaf tree from one leaf and its proof; reverts on a malformed proof.
    /// (Proofs come in calldata: a copy into memory cost a third of the hashing.)
    function top(uint256 n, uint256 index, bytes32 leafHash, bytes32[] calldata siblings)
        internal
        pure
        returns (bytes32 h)
    {
        if (index >= n) revert IndexOutOfRange(index, n);
        uint256 d = depth(n);
        if (siblings.length != d) revert BadProofLength(siblings.length, d);
        h = leafHash;
        unchecked {
            for (uint256 i; i < d; ++i) {
                bytes32 s = siblings[i];
                h = (index >> i) & 1 == 1 ? inner(s, h) : inner(h, s);
            }
        }
    }

    function verify(bytes32 root, uint256 n, uint256 index, bytes32 leafHash, bytes32[] calldata siblings)
        internal
        pure
        returns (bool)
    {
        return seal(n, top(n, index, leafHash, siblings)) == root;
    }
}
