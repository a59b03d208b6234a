// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {F32, Float32} from "./Float32.sol";

/// @title Primitives: the binary32 primitive table of docs/NUMERICS.md, on uint32 words
/// @notice Opcodes and word encodings are shared with offchain/softfloat.py PRIMITIVES:
///         floats as bits, int32 as two's complement, booleans as 0/1.
library Primitives {
    using Float32 for F32;

    uint256 internal constant COUNT = 22;

    /// @notice The opcode is not in the primitive table.
    error UnknownPrimitive(uint256 opcode);

    function fl(uint256 word) private pure returns (F32) {
        return F32.wrap(uint32(word));
    }

    function wd(F32 x) private pure returns (uint256) {
        return F32.unwrap(x);
    }

    function i32(uint256 word) private pure returns (int256) {
        return int256(int32(uint32(word)));
    }

    function u32(int256 i) private pure returns (uint256) {
        return uint256(uint32(int32(i)));
    }

    function opAdd(uint256 a, uint256 b, uint256) private pure returns (uint256) { return Float32.addBits(a, b); }
    function opSub(uint256 a, uint256 b, uint256) private pure returns (uint256) { return Float32.addBits(a, b ^ Float32.SIGN); }
    function opMul(uint256 a, uint256 b, uint256) private pure returns (uint256) { return wd(fl(a).mul(fl(b))); }
    function opFma(uint256 a, uint256 b, uint256 c) private pure returns (uint256) { return Float32.fmaBits(a, b, c); }
    function opDiv(uint256 a, uint256 b, uint256) private pure returns (uint256) { return wd(fl(a).div(fl(b))); }
    function opSqrt(uint256 a, uint256, uint256) private pure returns (uint256) { return wd(fl(a).sqrt()); }
    function opNeg(uint256 a, uint256, uint256) private pure returns (uint256) { return wd(fl(a).neg()); }
    function opAbs(uint256 a, uint256, uint256) private pure returns (uint256) { return wd(fl(a).abs()); }
    function opMin(uint256 a, uint256 b, uint256) private pure returns (uint256) { return wd(fl(a).min(fl(b))); }
    function opMax(uint256 a, uint256 b, uint256) private pure returns (uint256) { return wd(fl(a).max(fl(b))); }
    function opEq(uint256 a, uint256 b, uint256) private pure returns (uint256) { return fl(a).eq(fl(b)) ? 1 : 0; }
    function opLt(uint256 a, uint256 b, uint256) private pure returns (uint256) { return fl(a).lt(fl(b)) ? 1 : 0; }
    function opLe(uint256 a, uint256 b, uint256) private pure returns (uint256) { return fl(a).le(fl(b)) ? 1 : 0; }
    function opSelect(uint256 c, uint256 a, uint256 b) private pure returns (uint256) { return wd(Float32.select(c != 0, fl(a), fl(b))); }
    function opRint(uint256 a, uint256, uint256) private pure returns (uint256) { return wd(fl(a).rint()); }
    function opFloor(uint256 a, uint256, uint256) private pure returns (uint256) { return wd(fl(a).floor()); }
    function opTrunc(uint256 a, uint256, uint256) private pure returns (uint256) { return wd(fl(a).trunc()); }
    function opLdexp(uint256 a, uint256 n, uint256) private pure returns (uint256) { return wd(fl(a).ldexp(i32(n))); }
    function opFromInt32(uint256 a, uint256, uint256) private pure returns (uint256) { return wd(Float32.fromInt32(i32(a))); }
    function opToInt32Trunc(uint256 a, uint256, uint256) private pure returns (uint256) { return u32(fl(a).toInt32Trunc()); }
    function opToInt32Rne(uint256 a, uint256, uint256) private pure returns (uint256) { return u32(fl(a).toInt32Rne()); }
    function opCopy(uint256 a, uint256, uint256) private pure returns (uint256) { return a; }

    /// @notice One primitive on words already checked to be 32-bit (reverts UnknownPrimitive).
    /// @dev Direct calls down a binary tree of comparisons, not a table of function
    ///      pointers: the IR pipeline calls a pointer through a linear switch over every
    ///      target, which would cost the later opcodes more than the arithmetic.
    function evaluate(uint256 opcode, uint256 a, uint256 b, uint256 c) internal pure returns (uint256) {
        if (opcode < 11) {
            if (opcode < 5) {
                if (opcode < 2) return opcode == 0 ? opAdd(a, b, c) : opSub(a, b, c);
                if (opcode == 2) return opMul(a, b, c);
                return opcode == 3 ? opFma(a, b, c) : opDiv(a, b, c);
            }
            if (opcode < 8) {
                if (opcode == 5) return opSqrt(a, b, c);
                return opcode == 6 ? opNeg(a, b, c) : opAbs(a, b, c);
            }
            if (opcode == 8) return opMin(a, b, c);
            return opcode == 9 ? opMax(a, b, c) : opEq(a, b, c);
        }
        if (opcode < 16) {
            if (opcode < 13) return opcode == 11 ? opLt(a, b, c) : opLe(a, b, c);
            if (opcode == 13) return opSelect(a, b, c);
            return opcode == 14 ? opRint(a, b, c) : opFloor(a, b, c);
        }
        if (opcode < 19) {
            if (opcode == 16) return opTrunc(a, b, c);
            return opcode == 17 ? opLdexp(a, b, c) : opFromInt32(a, b, c);
        }
        if (opcode < COUNT) {
            if (opcode == 19) return opToInt32Trunc(a, b, c);
            return opcode == 20 ? opToInt32Rne(a, b, c) : opCopy(a, b, c);
        }
        revert UnknownPrimitive(opcode);
    }

    /// @notice Execute one primitive on uint32 words (operands must be < 2**32).
    function exec(uint256 opcode, uint256 a, uint256 b, uint256 c) internal pure returns (uint256) {
        if (a > 0xFFFFFFFF) revert Float32.NotBinary32(a);
        if (b > 0xFFFFFFFF) revert Float32.NotBinary32(b);
        if (c > 0xFFFFFFFF) revert Float32.NotBinary32(c);
        return evaluate(opcode, a, b, c);
    }
}
