"""The referee's arithmetic: binary32 on Python integers (float32.py, mirrored on chain by
contracts/lib/Float32.sol), the vectors and hardware references that check it (check.py),
and the bulk evaluator the soak runs under PyPy (worker.py). docs/NUMERICS.md §5-7."""
