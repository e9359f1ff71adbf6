"""Running compiled kernels on the host: arrays (`ndarray`), the compile cache (`compile`) and
loaded libraries (`module`)."""
from .module import Module, get_num_threads, set_num_threads

__all__ = ["Module", "get_num_threads", "set_num_threads"]
