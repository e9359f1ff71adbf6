"""How closely int8 runs of one QDQ file agree, pair by pair, against ONNX's own reference
implementation (onnx.reference.ReferenceEvaluator: the operators' definitions in NumPy, run node
by node as written) as well as against each other: tensorforge, ONNX Runtime as written (graph
optimizations off) and ONNX Runtime optimized (its default: fused QLinear kernels).

The files are those of benchmarks/lowp.py (onnxruntime.quantization.quantize_static: QDQ,
per-channel int8 weights, uint8 activations, calibrated on 8 random inputs).  The output of each
model is quantized (a QuantizeLinear/DequantizeLinear pair), so every run's output is a whole
number of quantization steps; the table gives, per pair, the share of output elements on the
same step ("exact") and within one step.  A pair of runs that both follow the definitions differ
only by float32 rounding inside each operator (summation orders, exp and erf to within an ulp);
a value that lands near the middle between two steps then rounds to different steps, and the
next layers carry that on.  How far it spreads depends on the model, which is what this shows.

    python benchmarks/lowp_agreement.py --onnx DIR --models bert_encoder dqn
"""
from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np

REFERENCE_OPSET = 21     # onnx.reference defines QuantizeLinear/DequantizeLinear from opset 19


def _reference(model):
    """ONNX's reference evaluator of `model`, converted to REFERENCE_OPSET first when it is older
    (the conversion keeps the operators' meaning)."""
    import onnx
    from onnx import version_converter
    from onnx.reference import ReferenceEvaluator
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), REFERENCE_OPSET)
    if opset < REFERENCE_OPSET:
        model = version_converter.convert_version(model, REFERENCE_OPSET)
        onnx.checker.check_model(model)
    return ReferenceEvaluator(model)


def runs_of(name: str, onnx_dir: str | None) -> tuple[dict, float]:
    """{run name: output} of the model's QDQ file, and its output's quantization step."""
    import lowp  # noqa: E402  (benchmarks/ is on sys.path when this file runs as a script)
    import onnx

    import tensorforge
    from tensorforge.frontend import from_onnx
    proto, feeds = lowp.load(name, onnx_dir)
    with tempfile.TemporaryDirectory() as tmp:
        path = lowp.quantize(proto, feeds, Path(tmp))
        model = onnx.load(path)
        graph = from_onnx(model)
        compiled = tensorforge.compile(graph, threads=1)
        outputs = {
            "ONNX reference": _reference(model).run(None, feeds)[0],
            "ORT as written": lowp.ort_session(path, optimize=False).run(None, feeds)[0],
            "ORT optimized": lowp.ort_session(path).run(None, feeds)[0],
            "tensorforge": compiled(*[feeds[v.name] for v in graph.inputs])[0],
        }
        step = lowp.output_step(path)
    return {k: np.asarray(v, np.float64) for k, v in outputs.items()}, step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["bert_encoder"])
    parser.add_argument("--onnx", help="a folder of NAME.onnx + NAME.npz (benchmarks/exports/export.py); default: the zoo")
    opts = parser.parse_args(argv)
    from tensorforge.testing.oracles import ort_int8_products_exact
    if not ort_int8_products_exact():
        print("note: this CPU has no int8 dot-product unit (VNNI, AMX): ONNX Runtime's fused int8 kernels "
              "add pairs of u8 x s8 products into int16 with saturation, so 'ORT optimized' can differ "
              "from the definitions by more than rounding")
    for name in opts.models:
        outputs, step = runs_of(name, opts.onnx)
        print(f"\n{name}: output step {step:.4g}; share of output elements on the same step / within one step")
        for (a, x), (b, y) in itertools.combinations(outputs.items(), 2):
            steps = np.abs(x - y) / step
            print(f"  {a:15s} vs {b:15s} {100 * np.mean(steps < 0.5):6.2f}% / {100 * np.mean(steps < 1.5):6.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
