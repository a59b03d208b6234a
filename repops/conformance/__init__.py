"""PyTorch's own test databases (OpInfo `op_db`, ModuleInfo `module_db`, shipped in the torch
wheel) run under RepOps and natively: every sample either gives native's result to rounding
(and the same bits on 1 and 2 threads), or is refused with RepOps' own error. A different
result (WRONG) or another exception type (FOREIGN) is a defect. `python -m repops.conformance`
regenerates docs/COVERAGE.md; tests/repops/test_opinfo.py runs a capped sweep in CI."""
