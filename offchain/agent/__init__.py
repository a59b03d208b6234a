"""Trainer agents: processes that take part in jobs on chain and survive restarts."""
