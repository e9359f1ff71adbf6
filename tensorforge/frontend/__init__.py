"""Frontends: convert a framework's model into a tensorforge Graph."""


def from_onnx(model, shapes=None, name=None, constants=None):
    from .onnx import from_onnx as _from_onnx
    return _from_onnx(model, shapes, name, constants)


def from_torch(module, example_inputs, dynamic_shapes=None, name=None):
    from .torch import from_torch as _from_torch
    return _from_torch(module, example_inputs, dynamic_shapes, name)
