"""The trainer library: runs a job under RepOps, keeps multi-level checkpoints, and
answers every query of every dispute level by re-executing what it did not keep."""
from .trainer import Trainer

__all__ = ["Trainer"]
