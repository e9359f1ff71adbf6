"""Graph passes, one per file; the order lives in graph/pipeline.py."""
