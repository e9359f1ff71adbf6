"""tensorforge: an end-to-end optimizing compiler for deep learning."""
__version__ = "0.1.0"
