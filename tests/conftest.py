"""Suite-wide settings: the default schedules come from the detected machine facts, not from a
per-machine calibration (fast and the same on every run); tests of calibration turn it on."""
import os

os.environ.setdefault("TENSORFORGE_CALIBRATE", "0")
