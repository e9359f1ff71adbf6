"""ONNX op converters, one module per op family; each registers with @converter."""
