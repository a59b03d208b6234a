// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Philox4x32-10, word 0: dropout's counter-based random bits (docs/NUMERICS.md §12)
/// @notice The spec is repops/reference/prims.py `philox`; the compiled kernels share
///         repops/kernels/philox.h. Words are uint32 values held in uint256.
library Philox {
    uint256 private constant M = 0xFFFFFFFF;

    /// @dev counter (c0, c1, c2, c3), key (k0, k1) -> output word 0. Round r: 64-bit products
    /// M0 * c0 and M1 * c2; c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); the key is bumped by W
    /// (mod 2^32) before every round but the first.
    function word0(uint256 c0, uint256 c1, uint256 c2, uint256 c3, uint256 k0, uint256 k1)
        internal
        pure
        returns (uint256)
    {
        // (unchecked: every value is below 2^64 and masked back to 32 bits)
        unchecked {
            for (uint256 r; r < 10; ++r) {
                if (r != 0) (k0, k1) = ((k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M);
                uint256 p0 = 0xD2511F53 * c0;
                uint256 p1 = 0xCD9E8D57 * c2;
                (c0, c1, c2, c3) = ((p1 >> 32) ^ c1 ^ k0, p1 & M, (p0 >> 32) ^ c3 ^ k1, p0 & M);
            }
        }
        return c0;
    }

    /// @notice Does dropout keep element `flat`? Word 0 of counter (flat mod 2^32, flat div
    /// 2^32, step, 0) under key (seed, stream), against the threshold, both unsigned.
    function keep(uint256 flat, uint256 step, uint256 seed, uint256 stream, uint256 threshold)
        internal
        pure
        returns (bool)
    {
        return word0(flat & M, (flat >> 32) & M, step, 0, seed, stream) >= threshold;
    }
}
