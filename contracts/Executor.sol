// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Primitives} from "./lib/Primitives.sol";

/// @title The one-step executor: one binary32 primitive of docs/NUMERICS.md with Float32.sol.
/// @dev Its own contract so that the soft-float's code does not count against the game's
/// size limit (EIP-170); pure, so calling it changes nothing.
contract Executor {
    function exec(uint256 opcode, uint256 a, uint256 b, uint256 c) external pure returns (uint256) {
        return Primitives.exec(opcode, a, b, c);
    }
}
