// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Bisection, Clock} from "./lib/Bisection.sol";
import {Rounds} from "./lib/Rounds.sol";
import {Kernels} from "./lib/Kernels.sol";
import {Merkle} from "./lib/Merkle.sol";
import {Nodes} from "./lib/Nodes.sol";
import {Tensors} from "./lib/Tensors.sol";
import {Executor} from "./Executor.sol";
import {JobRegistry} from "./JobRegistry.sol";

interface IDisputeGame {
    function registry() external view returns (JobRegistry);
    function nodeLeaves(uint256 id) external view returns (bytes32[2] memory);
    function decideOperator(uint256 id, uint256 winner, uint8 level, string calldata reason) external;
}

/// @title Levels 3-5 of the dispute on chain (docs/PROTOCOL.md §7-8): the disputed operator's
/// primitive kernels, one tensor's elements, one primitive. DisputeGame hands a match over at
/// Case 3 of level 2 (same node inputs, different outputs) and takes the decision back.
/// - Level 3: each party reveals the top of its kernel tree; a Merkle descent finds the first
///   differing kernel k (or, when the tops agree, k is the last: the result pseudo-kernel,
///   whose operands must be the node outputs each committed at level 2). Both reveal kernel k;
///   its structure (name + operand descriptors) must be the job's (kernel root, Case 1).
/// - Level 4: the first differing operand (or else the output) is opened into (header, chunk
///   tree); the header must be the one the kernel implies; a descent over the chunks and the
///   chunk bytes give the first differing element.
/// - Case 2: that operand element's source (a constant, an element of an op input or of an
///   earlier kernel's output) is proven; the party whose element differs loses.
/// - Level 5 (Case 3): the output element's operands are proven, the primitive is executed
///   (Executor: Float32.sol) or the index move replayed (gather/onehot); the party whose
///   element differs loses.
/// - A fault node (level 2) says where its decomposition faults: kernel k, a `fault.bool` whose
///   output commitment is FAULT(e) = sha256(0x0E || u64 e), ZERO after it. When that kernel is
///   the disputed one, level 5 checks the fault at element e (the smaller e if both fault there);
///   a party with nothing (ZERO) at the disputed kernel shows its faulting kernel before it
///   (showFault): the other agreed with a decomposition that faults there and went on.
/// - A kernel the job commits with a descriptor the chain cannot follow (MAT), or a node of no
///   kernels (more than 65,535), ends the match void: both out, stakes returned (nobody is wrong).
/// @dev The same round structure as DisputeGame: both parties post, the round closes when
/// both have; chess clocks carry over from level 2.
contract OperatorGame {
    using Bisection for Bisection.Descent;
    using Clock for Clock.Clocks;
    using Rounds for Rounds.Round;

    enum Phase {
        None,
        Tops, // reveal the kernel tree's top
        Descent, // over kernels (level 3) or over chunks (level 4)
        Kernel, // reveal kernel k
        TensorTop, // open the disputed tensor
        Chunk, // reveal the disputed chunk
        OperandSource, // Case 2: prove the source of the disputed operand element
        Step, // Case 3: prove the operands and execute
        Done
    }

    struct Match {
        Rounds.Round round; // the parties, their moves this round, their clocks
        // one slot: the job, the node, the phase, the flags and kernel k's indices (written
        // at almost every move: each later field here costs a warm write, not a new slot)
        uint64 job;
        uint64 node;
        Phase phase;
        bool sameTops; // the kernel trees agree: k is the result pseudo-kernel
        bool overChunks; // the descent runs over a tensor's chunks (else over kernels)
        uint32 count; // kernels of the node (the job's: a u32 in its kernel leaf)
        uint32 kernel; // k
        int32 operand; // the disputed operand of kernel k, -1 for its output
        bytes32 structRoot; // the job's kernel structures of the node
        bytes32[2] top; // each party's kernel tree top
        // over kernels, then over the disputed tensor's chunks; between the two (kernel k
        // revealed, tensor not yet opened) its a and b hold each party's commitment of the
        // disputed tensor, each replaced by that party's chunk-tree top as it opens it
        Bisection.Descent desc;
        bytes32 structHash; // sha256 of kernel k's structure (agreed: proven in the job's)
        bytes32 expect; // sha256 of the header the kernel implies
        bytes32 operandsHash; // kernel k's operands (agreed when its output is disputed)
        uint64 numel; // one slot: the disputed tensor's size and dtype, the disputed element
        uint64 flat;
        uint8 code;
        uint64[2] word; // each party's element there (at most 8 bytes)
        uint96[2] fault; // each party's node: (kernel + 1) << 64 | element where it faults, 0: no fault
    }

    /// @dev The other party's kernel k as its KernelPosted event holds it.
    struct Posted {
        bytes kernel;
        bytes32[] proof;
    }

    /// @dev Where a disputed operand element's source lies: the disputed node (either party's:
    /// their inputs agree; checked against its level-2 leaf) and, for an earlier kernel's
    /// output, that kernel's encoding and its proof in the kernel trees.
    struct Source {
        bytes node;
        bytes kernel;
        bytes32[] proof;
    }

    event Started(uint256 indexed id, uint256 node);
    event KernelFound(uint256 indexed id, uint256 kernel);
    event TensorDisputed(uint256 indexed id, uint256 kernel, int256 operand);
    event KernelPosted(uint256 indexed id, uint256 party, bytes kernel, bytes32[] proof);
    event ChunkPosted(uint256 indexed id, uint256 party, bytes chunk);
    event ChildrenPosted(uint256 indexed id, uint256 party, bytes32[] nodes);
    event ElementFound(uint256 indexed id, uint256 flat, uint256 wordA, uint256 wordB);

    error NotTheGame(address caller);
    error WrongPhase(uint256 id, Phase phase);
    error NotInTheJob(uint256 node);
    error NobodyTimedOut(uint256 id);
    error WrongStructure();
    error SourceNotProven();
    error NeitherMatches();
    error OtherChunkWrong();
    /// @notice The kernel passed as the other party's is not what it posted this round.
    error OtherKernelWrong();
    /// @notice The operands passed are not kernel k's (agreed by both).
    error WrongOperands();
    /// @notice The node passed is not the disputed node as the party posted it at level 2.
    error NotTheNode();
    /// @notice The nodes passed as the other party's are not what it posted this round.
    error OtherChildrenWrong(uint256 id);
    /// @notice Only a fault node's party with nothing at the disputed kernel (before which it
    /// faults) shows its faulting kernel.
    error NotYourFault(uint256 id);
    /// @notice The kernel is not the party's faulting kernel, proven in its tree.
    error FaultNotShown(uint256 id);

    IDisputeGame public immutable game;
    Executor public immutable executor;
    mapping(uint256 => Match) internal matches;

    constructor(IDisputeGame g, Executor e) {
        game = g;
        executor = e;
    }

    // -- views for agents -------------------------------------------------------------------------
    function state(uint256 id)
        external
        view
        returns (Phase phase, uint256 node, uint256 kernel, int256 operand, uint256 flat, uint8 waiting)
    {
        Match storage m = matches[id];
        return (m.phase, m.node, m.kernel, int256(m.operand), m.flat, m.round.clock.waiting);
    }

    function descent(uint256 id) external view returns (uint256 height, uint256 index, bool overChunks) {
        Match storage m = matches[id];
        return (m.desc.height, m.desc.index, m.overChunks);
    }

    function clocks(uint256 id) external view returns (uint64[2] memory) {
        return matches[id].round.clock.remaining();
    }

    // -- hand-over from level 2 -------------------------------------------------------------------
    function start(uint256 id, address[2] calldata party, uint256 job, uint256 node, uint64[2] calldata left,
                   uint96[2] calldata faults) external {
        if (msg.sender != address(game)) revert NotTheGame(msg.sender);
        Match storage m = matches[id];
        m.round.party = party;
        if (faults[0] | faults[1] != 0) m.fault = faults;
        m.job = uint64(job);
        m.node = uint64(node);
        m.phase = Phase.Tops;
        m.round.clock.setRemaining(left);
        emit Started(id, node);
        m.round.next();
    }

    function _move(uint256 id, Match storage m, Phase want) internal returns (uint256 i) {
        if (m.phase != want) revert WrongPhase(id, m.phase);
        i = m.round.move(id);
    }

    function _anchor(Match storage m, JobRegistry.Root which)
        internal
        view
        returns (bytes32 root, uint256 graphNodes, uint256 chunk)
    {
        (root, graphNodes,, chunk) = game.registry().anchor(m.job, which);
    }

    // -- level 3: kernels ---------------------------------------------------------------------------
    /// @notice Reveal the top of your kernel tree for the node, with the job's kernel count and
    /// structure root of the node and their proof in the job's kernel root. The count is the
    /// leaf's uint32: a wider type would let a count + 2**32 pass the proof and run the descent
    /// over a deeper tree than the honest party's, which could then not answer below its leaves.
    function postKernelTop(uint256 id, bytes32 top, uint32 count, bytes32 structRoot, bytes32[] calldata proof)
        external
    {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Tops);
        (bytes32 kernelRoot, uint256 graphNodes,) = _anchor(m, JobRegistry.Root.Kernel);
        bytes32 lf = Merkle.leaf(abi.encodePacked(count, structRoot));
        if (!Merkle.verify(kernelRoot, graphNodes, m.node, lf, proof)) revert NotInTheJob(m.node);
        if (count == 0) return _decide(id, m, VOID, 3, "the job's node has more kernels than the chain can follow");
        (m.count, m.structRoot) = (count, structRoot);
        m.top[i] = top;
        if (!m.round.both()) return;
        if (m.top[0] == m.top[1]) {
            m.sameTops = true;
            _kernelFound(id, m, count - 1);
        } else {
            m.desc.start(count, Merkle.seal(count, m.top[0]), m.top[0], Merkle.seal(count, m.top[1]), m.top[1]);
            m.phase = Phase.Descent;
            if (m.desc.atLeaf()) _atLeaf(id, m);
        }
        m.round.next();
    }

    function _kernelFound(uint256 id, Match storage m, uint256 k) internal {
        m.kernel = uint32(k);
        m.phase = Phase.Kernel;
        emit KernelFound(id, k);
    }

    /// @notice Descend (kernels, then chunks): as DisputeGame.postChildren.
    function postChildren(uint256 id, bytes32[] calldata nodes, bytes32[] calldata theirs) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Descent);
        uint256 w = m.desc.width();
        if (nodes.length != w) revert Bisection.WrongNodeCount(nodes.length, w);
        if (Bisection.subtree(nodes) != (i == 0 ? m.desc.a : m.desc.b)) {
            return _decide(id, m, 1 - i, m.overChunks ? 4 : 3, "its children do not hash to its node");
        }
        if (!m.round.both()) {
            emit ChildrenPosted(id, i, nodes);
            return;
        }
        // theirs hash up to the other's node, as its own did when it posted them (checked
        // again rather than stored: seven hashes cost less than a storage slot)
        if (Bisection.subtree(theirs) != (i == 0 ? m.desc.b : m.desc.a)) revert OtherChildrenWrong(id);
        if (i == 0) m.desc.down(nodes, theirs);
        else m.desc.down(theirs, nodes);
        if (m.desc.atLeaf()) {
            if (m.desc.index >= m.desc.n) {
                return _decide(id, m, m.desc.a == bytes32(0) ? 0 : 1, m.overChunks ? 4 : 3, "its tree has a leaf past the last");
            }
            _atLeaf(id, m);
        }
        m.round.next();
    }

    function _atLeaf(uint256 id, Match storage m) internal {
        if (m.overChunks) m.phase = Phase.Chunk;
        else _kernelFound(id, m, m.desc.index);
    }

    /// @notice Reveal kernel k: its encoding (with its proof in your kernel tree when the tops
    /// agreed, else it must hash to your leaf) and its structure's proof in the job's; for the
    /// result pseudo-kernel (k the last) your node as posted at level 2 (else empty). The
    /// second to post also passes the first's kernel and proof (from its KernelPosted event).
    function postKernel(
        uint256 id,
        bytes calldata enc,
        bytes32[] calldata proof,
        bytes32[] calldata structProof,
        Posted calldata other,
        bytes calldata node
    ) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Kernel);
        if (!_isKernelOf(m, i, enc, proof)) return _decide(id, m, 1 - i, 3, "its kernel does not hash to its kernel tree");
        Kernels.Kernel memory k;
        try this.parseKernel(enc) returns (Kernels.Kernel memory parsed) {
            k = parsed;
        } catch {
            return _decide(id, m, 1 - i, 3, "its kernel is malformed");
        }
        if (!Merkle.verify(m.structRoot, m.count, m.kernel, Merkle.leaf(k.structure), structProof)) {
            return _decide(id, m, 1 - i, 3, "its kernel is not the job's decomposition there (Case 1)");
        }
        if (!Kernels.settleable(k.structure)) {
            return _decide(id, m, VOID, 3, "the job's kernel there moves data the chain cannot follow (MAT)");
        }
        if (m.kernel == m.count - 1 && !_outputsMatch(id, i, node, k.operands)) {
            return _decide(id, m, 1 - i, 3, "its decomposition's outputs are not the node outputs it committed");
        }
        if (!m.round.both()) {
            emit KernelPosted(id, i, enc, proof);
            return;
        }
        // the first's kernel is in its tree, as it was when posted (so it parses, with the
        // same structure): checked again rather than stored
        if (!_isKernelOf(m, 1 - i, other.kernel, other.proof)) revert OtherKernelWrong();
        Kernels.Kernel memory o = Kernels.parse(other.kernel);
        m.structHash = sha256(k.structure);
        if (i == 0) _pickTensor(id, m, k, o);
        else _pickTensor(id, m, o, k);
        m.round.next();
    }

    /// @notice Show the kernel where your node's decomposition faults (its fault.bool with output
    /// FAULT(e), as your level-2 node says, proven in your kernel tree) when your tree has nothing
    /// (ZERO) at the disputed kernel, or the trees agree: the other agreed with a decomposition
    /// that faults there and went on. It loses.
    function showFault(uint256 id, bytes calldata enc, bytes32[] calldata proof) external {
        Match storage m = matches[id];
        if (m.phase != Phase.Kernel) revert WrongPhase(id, m.phase);
        uint256 i = m.round.seat(id, msg.sender);
        uint256 f = m.fault[i];
        if (f == 0 || f >> 64 > m.kernel || (!m.sameTops && (i == 0 ? m.desc.a : m.desc.b) != bytes32(0))) {
            revert NotYourFault(id);
        }
        uint256 k = (f >> 64) - 1;
        if (Merkle.top(m.count, k, Merkle.leaf(enc), proof) != m.top[i]) revert FaultNotShown(id);
        Kernels.Kernel memory kern = Kernels.parse(enc);
        if (!_faults(kern, uint64(f))) revert FaultNotShown(id);
        _decide(id, m, i, 3, "it agreed with a decomposition that faults, and went on from there");
    }

    /// @dev Is kernel `kern` a fault.bool faulting at `element` (its output FAULT(e))?
    function _faults(Kernels.Kernel memory kern, uint64 element) internal pure returns (bool) {
        return keccak256(kern.name) == keccak256("fault.bool")
            && kern.output == sha256(abi.encodePacked(bytes1(0x0e), element));
    }

    /// @dev Is enc party i's kernel k (its leaf, or in its tree when the tops agreed)?
    function _isKernelOf(Match storage m, uint256 i, bytes calldata enc, bytes32[] calldata proof)
        internal
        view
        returns (bool)
    {
        bytes32 lf = Merkle.leaf(enc);
        return m.sameTops ? Merkle.top(m.count, m.kernel, lf, proof) == m.top[i] : lf == (i == 0 ? m.desc.a : m.desc.b);
    }

    /// @dev External so that a malformed encoding can be caught (a loss, not a stuck move).
    function parseKernel(bytes calldata enc) external pure returns (Kernels.Kernel memory) {
        return Kernels.parse(enc);
    }

    /// @dev The poster's node outputs (level 2) are its decomposition's result operands; a node
    /// that is not the poster's reverts (nothing moves: it posts again with its own).
    function _outputsMatch(uint256 id, uint256 i, bytes calldata node, bytes32[] memory ops)
        internal
        view
        returns (bool)
    {
        if (Merkle.leaf(node) != game.nodeLeaves(id)[i]) revert NotTheNode();
        return Nodes.outputsHash(node) == keccak256(abi.encodePacked(ops));
    }

    /// @dev Both revealed kernel k (same structure): the first differing operand, else the
    /// output (whose operands, all agreed, level 5 reads), or, when a party's node faults at this
    /// kernel, the element it names (level 5 checks the fault there; each says 1 if it faults).
    function _pickTensor(uint256 id, Match storage m, Kernels.Kernel memory a, Kernels.Kernel memory b) internal {
        int256 operand = -1;
        for (uint256 o; o < a.operands.length; ++o) {
            if (a.operands[o] != b.operands[o]) {
                operand = int256(o);
                (m.desc.a, m.desc.b) = (a.operands[o], b.operands[o]);
                break;
            }
        }
        if (operand < 0) {
            (m.desc.a, m.desc.b) = (a.output, b.output);
            m.operandsHash = keccak256(abi.encodePacked(a.operands));
            uint256 at = type(uint256).max;
            bool[2] memory says;
            for (uint256 p; p < 2; ++p) {
                uint96 f = m.fault[p];
                if (f >> 64 == m.kernel + 1 && _faults(p == 0 ? a : b, uint64(f)) && uint64(f) <= at) {
                    if (uint64(f) < at) says[0] = says[1] = false;
                    (at, says[p]) = (uint64(f), true);
                }
            }
            if (at != type(uint256).max) { // no chunk to open: the fault names its element
                (m.flat, m.word) = (uint64(at), [uint64(says[0] ? 1 : 0), says[1] ? 1 : 0]);
                m.phase = Phase.Step;
                emit ElementFound(id, at, m.word[0], m.word[1]);
                return;
            }
        }
        (uint8 code, uint64[] memory shape) = executor.tensorType(a.structure, operand);
        m.operand = int32(operand);
        m.expect = sha256(Tensors.header(code, shape));
        m.code = code;
        m.numel = uint64(Tensors.numel(shape));
        m.phase = Phase.TensorTop;
        emit TensorDisputed(id, m.kernel, operand);
    }

    // -- level 4: elements --------------------------------------------------------------------------
    /// @notice Open your commitment of the disputed tensor: its header and the top of its chunk
    /// tree. The header must be the dtype and shape the kernel implies.
    function postTensorTop(uint256 id, bytes calldata header, bytes32 top) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.TensorTop);
        uint256 n = _chunks(m);
        if (sha256(header) != m.expect) {
            return _decide(id, m, 1 - i, 4, "its tensor does not have the dtype and shape the kernel implies");
        }
        if (sha256(abi.encodePacked(header, Merkle.seal(n, top))) != (i == 0 ? m.desc.a : m.desc.b)) {
            return _decide(id, m, 1 - i, 4, "its tensor opening does not hash to its commitment");
        }
        if (n == 0 && top != bytes32(0)) { // (no chunk to open: the empty tree's top is the one commitment)
            return _decide(id, m, 1 - i, 4, "its empty tensor's chunk tree is not the empty one");
        }
        if (i == 0) m.desc.a = top;
        else m.desc.b = top;
        if (!m.round.both()) return;
        m.overChunks = true;
        (bytes32 ta, bytes32 tb) = (m.desc.a, m.desc.b);
        m.desc.start(n, Merkle.seal(n, ta), ta, Merkle.seal(n, tb), tb);
        m.phase = m.desc.atLeaf() ? Phase.Chunk : Phase.Descent;
        m.round.next();
    }

    function _chunks(Match storage m) internal view returns (uint256) {
        (,, uint256 c) = _anchor(m, JobRegistry.Root.None);
        return (m.numel + c - 1) / c;
    }

    /// @notice Reveal your disputed chunk; the second to post also passes the first's (from
    /// its ChunkPosted event), and the first differing element is found.
    function postChunk(uint256 id, bytes calldata chunk, bytes calldata other) external {
        Match storage m = matches[id];
        uint256 i = _move(id, m, Phase.Chunk);
        uint256 size = Kernels.itemSize(m.code);
        (,, uint256 c) = _anchor(m, JobRegistry.Root.None);
        uint256 first = m.desc.index * c;
        uint256 want = (m.numel - first < c ? m.numel - first : c) * size;
        if (Merkle.leaf(chunk) != (i == 0 ? m.desc.a : m.desc.b) || chunk.length != want) {
            return _decide(id, m, 1 - i, 4, "its chunk does not hash to its leaf");
        }
        if (!m.round.both()) {
            emit ChunkPosted(id, i, chunk);
            return;
        }
        // the first's chunk hashes to its leaf, as it did when posted (checked again rather
        // than stored: one hash of a chunk costs less than a storage slot)
        if (other.length != want || Merkle.leaf(other) != (i == 0 ? m.desc.b : m.desc.a)) revert OtherChunkWrong();
        (bytes calldata a, bytes calldata b) = i == 0 ? (chunk, other) : (other, chunk);
        uint256 e = _firstDifference(a, b) / size; // the leaves differ, so the chunks do
        m.flat = uint64(first + e);
        m.word = [uint64(Tensors.le(a, e * size, size)), uint64(Tensors.le(b, e * size, size))];
        emit ElementFound(id, m.flat, m.word[0], m.word[1]);
        m.phase = m.operand >= 0 ? Phase.OperandSource : Phase.Step;
        m.round.next();
    }

    /// @dev The index of the first byte at which a and b (same length, not equal) differ,
    /// comparing 32-byte words (a word read past the end holds the calldata after the
    /// slice, so a difference there is never reached: one comes before).
    function _firstDifference(bytes calldata a, bytes calldata b) internal pure returns (uint256 at) {
        assembly ("memory-safe") {
            let wa := calldataload(a.offset)
            let wb := calldataload(b.offset)
            for {} eq(wa, wb) {} {
                at := add(at, 32)
                wa := calldataload(add(a.offset, at))
                wb := calldataload(add(b.offset, at))
            }
            for {} eq(byte(0, wa), byte(0, wb)) {} {
                at := add(at, 1)
                wa := shl(8, wa)
                wb := shl(8, wb)
            }
        }
    }

    // -- Case 2: an operand element against its source ----------------------------------------------
    /// @notice Prove the disputed operand element's source: for a view of an earlier kernel's
    /// output, that kernel's encoding and its proof in the kernel trees; then the source
    /// element's proof (unused for a constant).
    function resolveOperand(uint256 id, bytes calldata structure, Source calldata src,
                            Tensors.ElementProof calldata element) external {
        Match storage m = matches[id];
        if (m.phase != Phase.OperandSource) revert WrongPhase(id, m.phase);
        m.round.seat(id, msg.sender);
        if (sha256(structure) != m.structHash) revert WrongStructure();
        (bool isView, uint256 source, uint256 at) =
            Kernels.sourceOf(Kernels.descriptor(structure, uint256(int256(m.operand))), m.flat);
        uint256 truth = at;
        if (isView) {
            bytes32 commitment = _sourceCommitment(id, m, source, src);
            if (element.index != at || !Tensors.verify(commitment, element)) revert SourceNotProven();
            truth = Tensors.word(element);
        }
        _judge(id, m, truth, 4, "its operand element is not what its source holds (Case 2)");
    }

    /// @dev The commitment of an operand's source: an op input (agreed at level 2) or the
    /// output of an earlier kernel, proven in the kernel trees (before k both agree).
    function _sourceCommitment(uint256 id, Match storage m, uint256 source, Source calldata src)
        internal
        view
        returns (bytes32)
    {
        bytes32[2] memory leaves = game.nodeLeaves(id);
        bytes32 lf = Merkle.leaf(src.node);
        if (lf != leaves[0] && lf != leaves[1]) revert NotTheNode();
        bytes memory node = src.node;
        uint256 inputs = Nodes.inputCount(node);
        if (source < inputs) return Nodes.input(node, source);
        uint256 k = source - inputs;
        if (k >= m.kernel) revert SourceNotProven();
        bytes32 top = Merkle.top(m.count, k, Merkle.leaf(src.kernel), src.proof);
        if (top != m.top[0] && top != m.top[1]) revert SourceNotProven();
        return Kernels.parse(src.kernel).output;
    }

    // -- level 5: one primitive ---------------------------------------------------------------------
    /// @notice Prove the operand elements the disputed output element reads (one per operand of
    /// a primitive; for gather/onehot the index element, then the element it picks) against
    /// the agreed operand commitments; the referee computes the element.
    function resolveStep(
        uint256 id,
        bytes calldata structure,
        bytes32[] calldata operands,
        Tensors.ElementProof[] calldata proofs
    ) external {
        Match storage m = matches[id];
        if (m.phase != Phase.Step) revert WrongPhase(id, m.phase);
        m.round.seat(id, msg.sender);
        if (sha256(structure) != m.structHash) revert WrongStructure();
        if (keccak256(abi.encodePacked(operands)) != m.operandsHash) revert WrongOperands();
        uint256 result = executor.truth(structure, m.flat, operands, proofs);
        _judge(id, m, result, 5, "its output element is not the primitive's result (one step)");
    }

    function _judge(uint256 id, Match storage m, uint256 truth, uint8 level, string memory reason) internal {
        if (m.word[0] == truth) return _decide(id, m, 0, level, reason);
        if (m.word[1] == truth) return _decide(id, m, 1, level, reason);
        revert NeitherMatches();
    }

    /// @notice Anyone may end a match whose waiting party let its clock run out.
    function timeout(uint256 id) external {
        Match storage m = matches[id];
        if (m.phase == Phase.None || m.phase == Phase.Done) revert WrongPhase(id, m.phase);
        uint256 p = m.round.clock.expired();
        if (p == 2) revert NobodyTimedOut(id);
        _decide(id, m, p == 3 ? 2 : 1 - p, m.phase <= Phase.Kernel && !m.overChunks ? 3 : 4, "its clock ran out"); // 2: a draw
    }

    uint256 internal constant VOID = 3; // DisputeGame's: both out, stakes returned

    function _decide(uint256 id, Match storage m, uint256 winner, uint8 level, string memory reason) internal {
        m.phase = Phase.Done;
        game.decideOperator(id, winner, level, reason);
    }
}
