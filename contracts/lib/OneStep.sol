// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Primitives} from "./Primitives.sol";
import {Tensors} from "./Tensors.sol";

/// @title The one-step executor: operands proven against their tensor commitments, the
/// primitive executed with Float32.sol (Primitives.exec), the result compared.
library OneStep {
    error ArityMismatch(uint256 got, uint256 want);
    error OperandNotProven(uint256 operand);

    function arity(uint256 opcode) internal pure returns (uint256) {
        if (opcode == 3 || opcode == 13) return 3;
        if (opcode <= 4 || (opcode >= 8 && opcode <= 12) || opcode == 17) return 2;
        return 1;
    }

    /// @dev The primitive's result on the proven operand elements (the words of
    /// docs/PROTOCOL.md §7: binary32/int32 little-endian, bool 0/1; an int64 exponent clamped
    /// to [-400, 400]).
    function execute(uint256 opcode, bytes32[] memory commitments, Tensors.ElementProof[] memory operands)
        internal
        pure
        returns (uint256)
    {
        uint256 k = arity(opcode);
        if (operands.length != k || commitments.length != k) revert ArityMismatch(operands.length, k);
        uint256[3] memory w;
        for (uint256 i; i < k; ++i) {
            if (!Tensors.verify(commitments[i], operands[i])) revert OperandNotProven(i);
            uint256 v = Tensors.word(operands[i]);
            if (operands[i].code == 2) {
                int256 s = int256(int64(uint64(v)));
                s = s < -400 ? -400 : (s > 400 ? int256(400) : s);
                v = uint256(uint32(int32(s)));
            }
            w[i] = v;
        }
        return Primitives.exec(opcode, w[0], w[1], w[2]);
    }
}
