// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Clock} from "./Bisection.sol";

/// @title Simultaneous rounds between the two parties of a match: each posts once per round,
/// charged to its chess clock; the round closes when both have. Both games use it.
library Rounds {
    using Clock for Clock.Clocks;

    /// @dev Who moved this round is who the clock no longer waits for: a round starts
    /// waiting for both, and each move clears its party's bit (one slot less per move).
    struct Round {
        address[2] party;
        Clock.Clocks clock;
    }

    error NotAParty(uint256 id, address who);
    error AlreadyMoved(uint256 id, address who);

    function seat(Round storage r, uint256 id, address who) internal view returns (uint256) {
        if (who == r.party[0]) return 0;
        if (who == r.party[1]) return 1;
        revert NotAParty(id, who);
    }

    /// @dev The sender's move this round: its seat; reverts for a stranger or a second move.
    function move(Round storage r, uint256 id) internal returns (uint256 i) {
        i = seat(r, id, msg.sender);
        if (r.clock.waiting & (uint8(1) << uint8(i)) == 0) revert AlreadyMoved(id, msg.sender);
        r.clock.moved(i);
    }

    /// @dev Both have moved this round (the clock waits for neither).
    function both(Round storage r) internal view returns (bool) {
        return r.clock.waiting == 0;
    }

    /// @dev A new round: both owe a move, from now.
    function next(Round storage r) internal {
        r.clock.await_(3);
    }
}
