"""Errors of the chain layer: each names what went wrong and what to do about it."""


class ChainError(RuntimeError):
    """Base class; `fix` says what the user should do."""

    def __init__(self, problem: str, fix: str = ""):
        self.problem, self.fix = problem, fix
        super().__init__(f"{problem}\n  Fix: {fix}" if fix else problem)


class ToolchainError(ChainError):
    """A tool the chain layer needs (node, the solc shim, anvil) is missing or broken."""


class CompileError(ChainError):
    """solc rejected the contracts; the message carries solc's own diagnostics."""


class ChainUnavailable(ChainError):
    """The node cannot be reached, did not start, or died."""


class KeyLoadError(ChainError):
    """A private key or keystore could not be loaded."""


class DeploymentError(ChainError):
    """A deployment file does not match the chain it is used with, or its contracts are not
    Verde's (chain/integrity.py)."""


class TransactionReverted(ChainError):
    """A call or transaction reverted; `error` is the decoded custom error name (or None)."""

    def __init__(self, what: str, error: str | None, args: tuple = (), raw: bytes = b""):
        self.error, self.args_, self.raw = error, args, raw
        detail = f"{error}{args if args else '()'}" if error else (f"raw revert data 0x{raw.hex()}" if raw else "no revert data")
        super().__init__(f"{what} reverted: {detail}")
