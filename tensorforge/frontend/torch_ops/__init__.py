"""ATen converters, one module per family; `frontend/torch_convert.py` loads them all."""
