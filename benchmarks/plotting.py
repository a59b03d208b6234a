"""The one matmul-throughput plot the RepOps benchmarks draw (CPU and GPU)."""
from __future__ import annotations


def throughput_plot(path, sizes, series: dict, unit: str, title: str) -> None:
    """series: label -> throughput per size; a log2 size axis; PNG at `path`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for (label, ys), marker in zip(series.items(), ("o-", "s-", "^-", "d-")):
        ax.plot(sizes, ys, marker, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (n x n x n)")
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
