"""`tensorforge calibrate`: measure this machine's GEMM micro-kernel once and cache the choice
(tensorforge/calibrate.py); `--show` prints the cached record without measuring."""
from __future__ import annotations

from ..errors import UsageError


def calibrate_machine(opts) -> int:
    from tensorforge import calibrate as cal
    from tensorforge.ops.schedules import gemm_kernel

    if opts.show:
        record = gemm_kernel.load_calibration()
        if record is None:
            raise UsageError("this CPU has not been calibrated yet; run `tensorforge calibrate`")
    else:
        record = cal.calibrate(opts.target)
    print(cal.describe(record))
    print(f"record: {gemm_kernel.calibration_path()}")
    return 0
