"""The accuracy of a lower-precision compile against the float32 one, for `demo` and `inspect`
with --precision: max abs and relative L2 error of the first output, top-1 agreement over
random inputs, the units that ran the products, and both latencies."""
from __future__ import annotations

from typing import Callable


def random_inputs(model, seed: int) -> list:
    """Random inputs for the model: standard normal floats, zeros for integer and bool inputs."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = []
    for name in model.input_names:
        info = model.spec.values[name]
        shape, dtype = tuple(info["shape"]), np.dtype(info["dtype"])
        out.append(rng.standard_normal(shape).astype(dtype) if dtype.kind == "f" else np.zeros(shape, dtype))
    return out


def accuracy(reference, lowered, inputs_for: Callable[[int], list], trials: int) -> dict:
    """Errors of `lowered`'s first output against `reference`'s over `trials` input sets."""
    import numpy as np
    worst_abs, worst_rel, same_top1 = 0.0, 0.0, 0
    for k in range(trials):
        inputs = inputs_for(k)
        a = np.asarray(reference(*inputs)[0], np.float64)
        b = np.asarray(lowered(*inputs)[0], np.float64)
        worst_abs = max(worst_abs, float(np.max(np.abs(a - b))) if a.size else 0.0)
        norm = float(np.linalg.norm(a))
        worst_rel = max(worst_rel, float(np.linalg.norm(a - b)) / norm if norm else 0.0)
        flat_a, flat_b = a.reshape(a.shape[0], -1) if a.ndim > 1 else a[None], \
            b.reshape(b.shape[0], -1) if b.ndim > 1 else b[None]
        same_top1 += int(np.array_equal(flat_a.argmax(axis=-1), flat_b.argmax(axis=-1)))
    return {"max_abs": worst_abs, "rel_l2": worst_rel, "top1": same_top1, "trials": trials}


def print_report(precision: str, reference, lowered, inputs_for: Callable[[int], list], trials: int,
                 time_ms: Callable) -> None:
    """Print the accuracy of `lowered` against the float32 `reference`, its units and both speeds."""
    acc = accuracy(reference, lowered, inputs_for, trials)
    units = lowered.info.get("precision_units") or {}
    print(f"# {precision} against fp32 over {acc['trials']} random inputs: max abs error {acc['max_abs']:.3g}, "
          f"relative L2 error {acc['rel_l2']:.3g}, same top-1 on {acc['top1']}/{acc['trials']}")
    print("# products on: " + (", ".join(f"{u} x{n}" for u, n in units.items()) or "none"))
    inputs = inputs_for(0)
    t32, tlow = time_ms(lambda: reference(*inputs)), time_ms(lambda: lowered(*inputs))
    print(f"# latency: fp32 {t32:.2f} ms, {precision} {tlow:.2f} ms (fp32 / {precision} = {t32 / tlow:.2f})")
