"""python -m repops.conformance [--limit N]: regenerate docs/COVERAGE.md and the refusal table
(every sample of every float32 OpInfo and ModuleInfo; about 10-15 minutes on one core).
--reference-inputs: every OpInfo's reference inputs instead (extremal values; --limit 60 a few
minutes), printing the outcomes other than pass and refusal; nothing is written."""
import argparse
import warnings

from . import report

parser = argparse.ArgumentParser(prog="python -m repops.conformance", description=__doc__.split("\n")[0])
parser.add_argument("--limit", type=int, default=None, help="samples per op (default: every sample)")
parser.add_argument("--quiet", action="store_true", help="no progress bar")
parser.add_argument("--reference-inputs", action="store_true", help="OpInfos' extremal reference inputs; writes nothing")
args = parser.parse_args()
warnings.filterwarnings("ignore")
if args.reference_inputs:
    print(report.edges(args.limit, progress=not args.quiet))
else:
    counts = report.write(args.limit, progress=not args.quiet)
    print(f"wrote {report.COVERAGE} and {report.REFUSED}: {counts}")
