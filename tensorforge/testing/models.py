"""The model zoo: the TVM paper's workloads built in code as ONNX models with seeded random
weights, so the whole ONNX path (frontend, graph passes, compiler) runs with no downloads.

    model, inputs = tensorforge.testing.models.get("resnet18", batch=1, seed=0)
    graph = tensorforge.frontend.from_onnx(model)

`NAMES` lists the models; `get` returns (onnx.ModelProto, {input name: example input}).  The
same (name, batch, seed) always gives the same weights and inputs.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .models_cnn import dcgan_generator, dqn, mobilenet_v1, resnet18
from .models_seq import bert_encoder, lstm_lm

_BUILDERS: dict[str, Callable] = {
    "resnet18": resnet18,
    "mobilenet_v1": mobilenet_v1,
    "lstm_lm": lstm_lm,
    "dqn": dqn,
    "dcgan_generator": dcgan_generator,
    "bert_encoder": bert_encoder,
}

NAMES: list[str] = list(_BUILDERS)


def get(name: str, batch: int = 1, seed: int = 0) -> tuple:
    """(onnx.ModelProto, {input name: example input array}) for the named workload."""
    try:
        build = _BUILDERS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; the zoo has {', '.join(NAMES)}") from None
    if not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"model {name}: batch must be a positive integer, got {batch!r}")
    return build(batch=int(batch), seed=seed)
