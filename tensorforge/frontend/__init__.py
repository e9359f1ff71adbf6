"""Frontends: convert a framework's model into a tensorforge Graph."""


def from_onnx(model, shapes=None, name=None, constants=None):
    from .onnx import from_onnx as _from_onnx
    return _from_onnx(model, shapes, name, constants)
