"""python -m repops.conformance [--limit N]: regenerate docs/COVERAGE.md and the refusal table
(every sample of every float32 OpInfo and ModuleInfo; about 10-15 minutes on one core)."""
import argparse
import warnings

from . import report

parser = argparse.ArgumentParser(prog="python -m repops.conformance", description=__doc__.split("\n")[0])
parser.add_argument("--limit", type=int, default=None, help="samples per op (default: every sample)")
parser.add_argument("--quiet", action="store_true", help="no progress bar")
args = parser.parse_args()
warnings.filterwarnings("ignore")
counts = report.write(args.limit, progress=not args.quiet)
print(f"wrote {report.COVERAGE} and {report.REFUSED}: {counts}")
