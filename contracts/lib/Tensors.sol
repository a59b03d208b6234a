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

    /// @dev 0x03 || u8 dtype || u8 ndim || u64be dims, in one allocation.
    function header(uint8 code, uint64[] memory shape) internal pure returns (bytes memory h) {
        uint256 nd = shape.length;
        h = new bytes(3 + 8 * nd);
        assembly ("memory-safe") {
            mstore8(add(h, 32), 0x03)
            mstore8(add(h, 33), code)
            mstore8(add(h, 34), and(nd, 0xff))
            // each dim as the top 8 bytes of a word stored at its place: the next dim's store
            // overwrites the rest (the last one's lands past h, in unallocated memory)
            for { let i := 0 } lt(i, nd) { i := add(i, 1) } {
                mstore(add(add(h, 35), mul(8, i)), shl(192, mload(add(shape, add(32, mul(32, i))))))
            }
        }
    }

    function numel(uint64[] memory shape) internal pure returns (uint256 n) {
        n = 1;
        for (uint256 i; i < shape.length; ++i) n *= shape[i];
    }

    /// @dev Does the proof open `commitment` at its index? Reverts on malformed input.
    /// (Calldata: a proof copied into memory costs more than all the hashing it takes.)
    function verify(bytes32 commitment, ElementProof calldata p) internal pure returns (bool) {
        uint256 size = itemSize(p.code);
        uint64[] memory shape = p.shape; // one copy for numel and the header
        uint256 n = numel(shape);
        uint256 nchunks = (n + p.chunk - 1) / p.chunk;
        uint256 c = p.index / p.chunk;
        uint256 want = (n - c * p.chunk < p.chunk ? n - c * p.chunk : p.chunk) * size;
        if (p.index >= n) revert Merkle.IndexOutOfRange(p.index, n);
        if (p.chunkBytes.length != want) revert BadChunkLength(p.chunkBytes.length, want);
        bytes32 root = Merkle.seal(nchunks, Merkle.top(nchunks, c, Merkle.leaf(p.chunkBytes), p.siblings));
        return sha256(abi.encodePacked(header(p.code, shape), root)) == commitment;
    }

    /// @dev The element's bytes, as a little-endian word (the primitive table's uint32 for
    /// float32/int32/bool).
    function word(ElementProof calldata p) internal pure returns (uint256) {
        uint256 size = itemSize(p.code);
        return le(p.chunkBytes, (p.index % p.chunk) * size, size);
    }

    /// @dev Bytes [off, off + size) of b (size <= 32) as a little-endian word: how elements lie
    /// in a chunk.
    function le(bytes calldata b, uint256 off, uint256 size) internal pure returns (uint256 w) {
        if (off + size > b.length) revert BadChunkLength(b.length, off + size);
        assembly ("memory-safe") {
            let x := calldataload(add(b.offset, off))
            for { let i := 0 } lt(i, size) { i := add(i, 1) } { w := or(w, shl(shl(3, i), byte(i, x))) }
        }
    }
}
