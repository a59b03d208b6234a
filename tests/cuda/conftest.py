"""The CUDA tests reuse the RepOps sample table and helpers of tests/repops."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "repops"))
