"""Suite-wide settings: the default schedules come from the detected machine facts, not from a
per-machine calibration (fast and the same on every run); tests of calibration turn it on.
Kernels are lowered in the compiling process (no lowering workers), so that a template a test
monkeypatches is the one that lowers; tests of parallel lowering turn the workers on."""
import os

os.environ.setdefault("TENSORFORGE_CALIBRATE", "0")
os.environ.setdefault("TENSORFORGE_LOWERING_WORKERS", "1")
