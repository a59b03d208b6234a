"""The Verde wire format (docs/PROTOCOL.md): canonical encodings, Merkle trees, tensor and
node commitments, the job spec. Python and Solidity implement it once each, and both
check tests/vectors/protocol.json."""
