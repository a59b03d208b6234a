// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Merkle} from "./Merkle.sol";

/// @title Chunked tensor commitments of docs/PROTOCOL.md §3 and their element proofs
/// @dev commitment = H(0x03 || u8 dtype || u8 ndim || u64be dims || chunk-tree root), the chunk
/// tree being a Merkle tree (§2) over leaf(chunk bytes), `chunk` elements per chunk.
library Tensors {
    error UnknownDtype(uint8 code);
    error BadChunkLength(uint256 got, uint256 want);

    struct ElementProof {
        uint8 code; // 1 float32, 2 int64, 3 bool, 4 int32
        uint64[] shape;
        uint256 chunk; // elements per chunk
        uint256 index; // flat, row-major
        bytes chunkBytes;
        bytes32[] siblings;
    }

    function itemSize(uint8 code) internal pure returns (uint256) {
        if (code == 1 || code == 4) return 4;
        if (code == 2) return 8;
        if (code == 3) return 1;
        revert UnknownDtype(code);
    }

    function header(uint8 code, uint64[] memory shape) internal pure returns (bytes memory h) {
        h = abi.encodePacked(bytes1(0x03), code, uint8(shape.length));
        for (uint256 i; i < shape.length; ++i) h = abi.encodePacked(h, shape[i]);
    }

    function numel(uint64[] memory shape) internal pure returns (uint256 n) {
        n = 1;
        for (uint256 i; i < shape.length; ++i) n *= shape[i];
    }

    /// @dev Does the proof open `commitment` at its index? Reverts on malformed input.
    /// (Calldata: a proof copied into memory costs more than all the hashing it takes.)
    function verify(bytes32 commitment, ElementProof calldata p) internal pure returns (bool) {
        uint256 size = itemSize(p.code);
        uint256 n = numel(p.shape);
        uint256 nchunks = (n + p.chunk - 1) / p.chunk;
        uint256 c = p.index / p.chunk;
        uint256 want = (n - c * p.chunk < p.chunk ? n - c * p.chunk : p.chunk) * size;
        if (p.index >= n) revert Merkle.IndexOutOfRange(p.index, n);
        if (p.chunkBytes.length != want) revert BadChunkLength(p.chunkBytes.length, want);
        bytes32 root = Merkle.seal(nchunks, Merkle.top(nchunks, c, Merkle.leaf(p.chunkBytes), p.siblings));
        return sha256(abi.encodePacked(header(p.code, p.shape), root)) == commitment;
    }

    /// @dev The element's bytes, as a little-endian word (the primitive table's uint32 for
    /// float32/int32/bool).
    function word(ElementProof calldata p) internal pure returns (uint256 w) {
        uint256 size = itemSize(p.code);
        uint256 off = (p.index % p.chunk) * size;
        for (uint256 i; i < size; ++i) w |= uint256(uint8(p.chunkBytes[off + i])) << (8 * i);
    }
}
