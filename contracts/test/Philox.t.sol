// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "./Cheats.sol";
import {Philox} from "../lib/Philox.sol";

/// @dev Philox.sol against Random123's published answers (kat_vectors, philox4x32 10: output
///      word 0), and the mask's threshold rule by fuzzing. Python's side: tests/repops/test_dropout.py
///      (the same vectors) and tests/onchain/test_philox_onchain.py (Executor against the spec).
contract PhiloxTest is Test {
    uint256 internal constant M = 0xFFFFFFFF;

    function test_knownAnswers_random123() public pure {
        assertEq(Philox.word0(0, 0, 0, 0, 0, 0), 0x6627e8d5, "all zero");
        assertEq(Philox.word0(M, M, M, M, M, M), 0x408f276d, "all ones");
        assertEq(Philox.word0(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0), 0xd16cfe09,
                 "pi digits");
    }

    function testFuzz_keepIsWordAgainstThreshold(uint64 flat, uint32 step, uint32 seed, uint32 stream, uint32 t)
        public
        pure
    {
        uint256 w = Philox.word0(uint32(flat), flat >> 32, step, 0, seed, stream);
        assertTrue(w <= M, "a 32-bit word");
        assertTrue(Philox.keep(flat, step, seed, stream, t) == (w >= t), "keep is word >= threshold");
        assertTrue(Philox.keep(flat, step, seed, stream, 0), "threshold 0 keeps everything");
    }
}
