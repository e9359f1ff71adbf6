"""Real models for benchmarks/e2e.py: the cases `real_models.py --out DIR` writes (in the ONNX
backend-test layout, DIR/real/test_NAME/model.onnx with test_data_set_0/input_N.pb) as
OUT/NAME.onnx with OUT/NAME.npz (the inputs, by name), the folder layout `e2e.py --onnx` reads.

    python ../shared/real_models.py --out REAL          # the five real models (see its help)
    python benchmarks/real_cases.py REAL DIR
    python benchmarks/e2e.py --onnx DIR --threads 1,2
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np


def convert(cases: Path, out: Path) -> list[str]:
    import onnx
    from onnx import numpy_helper
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for case in sorted(p for p in cases.glob("**/test_*") if (p / "model.onnx").exists()):
        name = case.name[len("test_"):]
        model = onnx.load(str(case / "model.onnx"), load_external_data=False)
        weights = {i.name for i in model.graph.initializer}
        inputs = [i.name for i in model.graph.input if i.name not in weights]
        feeds = {}
        for k, input_name in enumerate(inputs):
            tensor = onnx.TensorProto()
            tensor.ParseFromString((case / "test_data_set_0" / f"input_{k}.pb").read_bytes())
            feeds[input_name] = numpy_helper.to_array(tensor)
        shutil.copyfile(case / "model.onnx", out / f"{name}.onnx")
        np.savez(out / f"{name}.npz", **feeds)
        names.append(name)
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", help="the folder real_models.py wrote")
    ap.add_argument("out", help="the folder to write NAME.onnx and NAME.npz into")
    args = ap.parse_args(argv)
    names = convert(Path(args.cases), Path(args.out))
    if not names:
        print(f"no test_*/model.onnx under {args.cases}", file=sys.stderr)
        return 1
    print(f"{len(names)} models: {', '.join(names)} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
