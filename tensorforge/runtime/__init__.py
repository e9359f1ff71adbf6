"""Running compiled kernels on the host: arrays (`ndarray`), the compile cache (`compile`) and
loaded libraries (`module`)."""
from .compile import CompileError, compile_source
from .module import Module, get_num_threads, set_num_threads

__all__ = ["CompileError", "Module", "compile_source", "get_num_threads", "set_num_threads"]
