"""Operators: one `@op` record each (see registry.py), grouped by family in this package."""
from .registry import COMPLEX, INJECTIVE, OPAQUE, REDUCTION, OpDef, OpError, TensorType, all_ops, get, op

__all__ = ["op", "get", "all_ops", "OpDef", "OpError", "TensorType", "INJECTIVE", "REDUCTION", "COMPLEX", "OPAQUE"]
