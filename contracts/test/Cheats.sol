// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @dev The few forge cheatcodes these tests use (forge-std is not on npm).
interface Vm {
    function readFile(string calldata path) external view returns (string memory);
    function parseJsonBytes(string calldata json, string calldata key) external pure returns (bytes memory);
    function parseJsonUint(string calldata json, string calldata key) external pure returns (uint256);
    function expectRevert(bytes calldata revertData) external;
    function warp(uint256 timestamp) external;
    function roll(uint256 blockNumber) external;
    function deal(address who, uint256 balance) external;
    function prank(address sender) external;
    function startPrank(address sender) external;
    function stopPrank() external;
    function parseJsonBytes32Array(string calldata json, string calldata key) external pure returns (bytes32[] memory);
    function parseJsonBytes32(string calldata json, string calldata key) external pure returns (bytes32);
    function parseJsonUintArray(string calldata json, string calldata key) external pure returns (uint256[] memory);
    function parseJsonBytesArray(string calldata json, string calldata key) external pure returns (bytes[] memory);
}

/// @dev Minimal test base: the cheatcode handle and assertions that say what differed.
abstract contract Test {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    error AssertEq(string what, uint256 got, uint256 want);
    error AssertTrue(string what);

    function assertEq(uint256 got, uint256 want, string memory what) internal pure {
        if (got != want) revert AssertEq(what, got, want);
    }

    function assertTrue(bool ok, string memory what) internal pure {
        if (!ok) revert AssertTrue(what);
    }

    function bound(uint256 x, uint256 lo, uint256 hi) internal pure returns (uint256) {
        return lo + x % (hi - lo + 1);
    }
}
