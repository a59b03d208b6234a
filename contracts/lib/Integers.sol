// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Float32} from "./Float32.sol";

/// @title The integer kernels of docs/NUMERICS.md §13 on one element: exact integers, the
/// result wrapped into its dtype (two's complement; bool: != 0; f32: nearest-even). `fault` is
/// a copy: its element is what a fault claim says is true (docs/NUMERICS.md §14).
/// @dev Opcodes and words as offchain/softfloat/integers.py: op index in OPS, dtype codes
/// 2 int64, 3 bool, 4 int32 (and 1 float32 for to_f32's result); words are the elements'
/// little-endian bytes as unsigned integers.
library Integers {
    error UnknownIntegerKernel(uint256 op);

    uint256 internal constant DIV_FLOOR = 3;
    uint256 internal constant SELECT = 18;
    uint256 internal constant TO_I64 = 20;
    uint256 internal constant TO_F32 = 23;
    uint256 internal constant FAULT = 24; // a copy whose first nonzero element is where the step faults
    uint256 internal constant GATHER = 25;

    /// @dev A word of dtype `code` as its value (bool: any nonzero byte is true).
    function value(uint256 w, uint256 code) internal pure returns (int256) {
        if (code == 3) return w & 0xFF != 0 ? int256(1) : int256(0);
        if (code == 4) return int256(int32(uint32(w)));
        return int256(int64(uint64(w)));
    }

    /// @dev An exact result as the word of dtype `code`.
    function pack(int256 v, uint256 code) internal pure returns (uint256) {
        if (code == 3) return v != 0 ? 1 : 0;
        if (code == 4) return uint256(uint32(uint256(v)));
        if (code == 2) return uint256(uint64(uint256(v)));
        return v < 0 ? Float32.roundPack(1, uint256(-v), 0) : Float32.roundPack(0, uint256(v), 0);
    }

    function resultCode(uint256 op, uint256 code) internal pure returns (uint256) {
        if (op >= 15 && op <= 17) return 3; // eq, lt, le
        if (op == TO_I64) return 2;
        if (op == TO_I64 + 1) return 4;
        if (op == TO_I64 + 2) return 3;
        if (op == TO_F32) return 1;
        return code;
    }

    /// @dev Truncating division (Solidity's) with x / 0 = 0; INT_MIN / -1 is 2^63 here and wraps in pack.
    function _tdiv(int256 a, int256 b) private pure returns (int256) {
        return b == 0 ? int256(0) : a / b;
    }

    function _fdiv(int256 a, int256 b) private pure returns (int256 q) {
        if (b == 0) return 0;
        q = a / b;
        if (q * b != a && ((a < 0) != (b < 0))) q -= 1;
    }

    /// @notice Kernel `op`.<code> on operand words a, b, c (select: c ? a : b reads (a, b, c) as
    /// (cond, x, y)) -> the result word.
    function exec(uint256 op, uint256 code, uint256 a, uint256 b, uint256 c) internal pure returns (uint256) {
        int256 x = value(a, op == SELECT ? 3 : code);
        int256 y = value(b, code);
        int256 r;
        unchecked {
            if (op < 7) {
                if (op == 0) r = x + y;
                else if (op == 1) r = x - y;
                else if (op == 2) r = x * y; // |x|, |y| < 2^63: exact in int256
                else if (op == DIV_FLOOR) r = _fdiv(x, y);
                else if (op == 4) r = _tdiv(x, y);
                else if (op == 5) r = y == 0 ? int256(0) : x - y * _fdiv(x, y);
                else r = y == 0 ? int256(0) : x - y * _tdiv(x, y);
            } else if (op < 15) {
                if (op == 7) r = x & y;
                else if (op == 8) r = x | y;
                else if (op == 9) r = x ^ y;
                else if (op == 10) r = code == 3 ? 1 - x : ~x;
                else if (op == 11) r = -x;
                else if (op == 12) r = x < 0 ? -x : x;
                else if (op == 13) r = x < y ? x : y;
                else r = x < y ? y : x;
            } else if (op < 18) {
                r = (op == 15 ? x == y : op == 16 ? x < y : x <= y) ? int256(1) : int256(0);
            } else if (op == SELECT) {
                r = x != 0 ? y : value(c, code);
            } else if (op <= FAULT) {
                r = x; // copy, the casts and fault: the value, wrapped into the result dtype by pack
            } else {
                revert UnknownIntegerKernel(op);
            }
        }
        return pack(r, resultCode(op, code));
    }
}
