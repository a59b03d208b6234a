"""Reference models for RepOps and the Verde jobs: builders registered by name."""
from .llama import LlamaConfig, LlamaLM
from .mlp import MLPClassifier, MLPConfig

BUILDERS = {"mlp": (MLPConfig, MLPClassifier), "llama": (LlamaConfig, LlamaLM)}


def build(name: str, **config):
    if name not in BUILDERS:
        raise KeyError(f"unknown model {name!r}; registered: {', '.join(sorted(BUILDERS))}")
    cfg_cls, model_cls = BUILDERS[name]
    return model_cls(cfg_cls(**config))
