// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Primitives} from "../lib/Primitives.sol";

/// @title Float32Harness: batch evaluation of one primitive, for differential tests and
///        the gas benchmark. Not part of the protocol.
contract Float32Harness {
    /// @notice The operand arrays differ in length.
    error LengthMismatch(uint256 a, uint256 b, uint256 c);

    /// @notice r[i] = primitive(opcode)(a[i], b[i], c[i]); gasUsed[i] is the gas of that one
    ///         evaluation through Primitives.evaluate (the referee's dispatch included; the copy row measures it).
    function run(uint256 opcode, uint32[] calldata a, uint32[] calldata b, uint32[] calldata c)
        external
        view
        returns (uint32[] memory r, uint32[] memory gasUsed)
    {
        if (a.length != b.length || a.length != c.length) revert LengthMismatch(a.length, b.length, c.length);
        if (opcode >= Primitives.COUNT) revert Primitives.UnknownPrimitive(opcode);
        r = new uint32[](a.length);
        gasUsed = new uint32[](a.length);
        for (uint256 i = 0; i < a.length; i++) {
            (uint256 x, uint256 y, uint256 z) = (a[i], b[i], c[i]);
            uint256 g = gasleft();
            uint256 out = Primitives.evaluate(opcode, x, y, z);
            gasUsed[i] = uint32(g - gasleft());
            r[i] = uint32(out);
        }
    }

    /// @notice One primitive through the checked entry point the referee uses.
    function exec(uint256 opcode, uint256 a, uint256 b, uint256 c) external pure returns (uint256) {
        return Primitives.exec(opcode, a, b, c);
    }
}
