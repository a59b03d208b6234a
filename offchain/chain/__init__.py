"""The one place that compiles contracts/ and hands out a connected chain."""
from .anvil import CHAIN_ID, AnvilProcess
from .backends import connect, load_key
from .client import Chain
from .compiler import Artifact, Artifacts, compile_contracts
from .errors import (ChainError, ChainUnavailable, CompileError, KeyLoadError, ToolchainError,
                     TransactionReverted)

__all__ = ["AnvilProcess", "Artifact", "Artifacts", "CHAIN_ID", "Chain", "ChainError", "ChainUnavailable",
           "CompileError", "KeyLoadError", "ToolchainError", "TransactionReverted", "compile_contracts",
           "connect", "load_key"]
