"""Export the workloads of benchmarks/exports/models.py with torch.onnx.export, as a user would:
NAME.onnx plus NAME.npz (the example inputs, by input name) in a folder that
`python benchmarks/e2e.py --onnx DIR` then runs against ONNX Runtime and PyTorch.

    python benchmarks/exports/export.py                        # all six into benchmarks/exports/onnx/
    python benchmarks/exports/export.py --models dqn --out /tmp/exports
    python benchmarks/exports/export.py --exporter torchscript # the legacy TorchScript exporter

Exporter: `dynamo` is what torch.onnx.export does by default since PyTorch 2.9 (torch.export,
needs the onnxscript package); `torchscript` is the exporter before it.  The default, `auto`,
takes `dynamo` when onnxscript imports and `torchscript` otherwise.  Other settings are the
exporter's defaults: static shapes (the example inputs'), its default opset, its own graph
optimizations (the dynamo exporter folds batch norms into convolutions, as users get them).

Each export is checked before anything is written: ONNX Runtime runs the exported file on the
example inputs and must agree with the module in eager PyTorch (rtol 1e-3, atol 1e-4).  The
files are written under a temporary name and renamed.  The model's metadata records the
workload name and seed (`tensorforge.benchmarks.workload`, `...seed`), so e2e.py can time the
very module that was exported as the PyTorch peer.  The .onnx files are large (up to 80 MB)
and not kept in git: this script remakes them in under a minute.
"""
from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import logging
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models  # noqa: E402  (benchmarks/exports/models.py)

DEFAULT_OUT = Path(__file__).resolve().parent / "onnx"
EXPORTERS = ("auto", "dynamo", "torchscript")
META_WORKLOAD, META_SEED = "tensorforge.benchmarks.workload", "tensorforge.benchmarks.seed"


def name_workload(proto, workload: str, seed: int) -> None:
    """Write into the ModelProto's metadata the workload and seed its module was built from, which
    e2e.py --onnx reads to time that very module as the PyTorch peer."""
    for key, value in ((META_WORKLOAD, workload), (META_SEED, str(seed))):
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value


def resolve_exporter(exporter: str) -> str:
    """`auto` -> dynamo when torch.onnx's dynamo exporter can run here (onnxscript installed and
    torch new enough to take dynamo=), else torchscript."""
    if exporter not in EXPORTERS:
        raise ValueError(f"unknown exporter {exporter!r}; choose from {', '.join(EXPORTERS)}")
    if exporter != "auto":
        return exporter
    import torch

    try:
        import onnxscript  # noqa: F401
    except ImportError:
        return "torchscript"
    return "dynamo" if "dynamo" in inspect.signature(torch.onnx.export).parameters else "torchscript"


def quiet_export(module, args: tuple, path: str, input_names: list, output_names: list, exporter: str) -> None:
    """torch.onnx.export with the exporter's progress chatter and deprecation notices held back
    (they are printed when the export fails)."""
    import torch

    kwargs = dict(input_names=list(input_names), output_names=list(output_names))
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = exporter == "dynamo"
    chatter = io.StringIO()
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(chatter):
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, path, **kwargs)
    except Exception:
        sys.stderr.write(chatter.getvalue())
        raise
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def export(name: str, out_dir: Path, exporter: str = "auto", seed: int = 0) -> Path:
    """Export workload `name` to out_dir/NAME.onnx and out_dir/NAME.npz after checking the file
    against eager PyTorch with ONNX Runtime; returns the .onnx path."""
    import onnx
    import onnxruntime as ort
    import torch

    exporter = resolve_exporter(exporter)
    module, feeds = models.get(name, seed)
    args = tuple(torch.from_numpy(feeds[n]) for n in models.input_names(name))
    with torch.inference_mode():
        expected = module(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        raw = os.path.join(tmp, f"{name}.raw.onnx")
        quiet_export(module, args, raw, models.input_names(name), models.output_names(name), exporter)
        proto = onnx.load(raw)
        name_workload(proto, name, seed)
        sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, feeds)
        for k, (a, b) in enumerate(zip(got, expected)):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-3, atol=1e-4,
                                       err_msg=f"{name}: output {k} of the {exporter} export run by ONNX Runtime "
                                               f"differs from eager PyTorch")
        onnx_tmp, npz_tmp = os.path.join(tmp, f"{name}.onnx"), os.path.join(tmp, f"{name}.npz")
        onnx.save(proto, onnx_tmp)
        np.savez(npz_tmp, **feeds)
        os.replace(npz_tmp, out_dir / f"{name}.npz")
        os.replace(onnx_tmp, out_dir / f"{name}.onnx")
    return out_dir / f"{name}.onnx"


def select_names(only: str | None, known, what: str) -> list | None:
    """The comma-separated names of `--only` (default: all `known`), or None after a one-line
    error naming the unknown ones (`what`: "model", "architecture")."""
    names = only.split(",") if only else list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown {what}(s) {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return None
    return names


def export_each(names: list, out: Path, export_one) -> int:
    """`export_one(name)` for each name, a failure reported on one line while the rest still
    export; each written file's path printed.  The exit status: 1 if any failed."""
    failed = []
    for name in names:
        try:
            export_one(name)
        except Exception as err:      # one model's failure is reported; the rest still export
            print(f"{name}: FAILED ({type(err).__name__}: {str(err).splitlines()[0][:200]})", flush=True)
            failed.append(name)
            continue
        print(f"{name}: {out / (name + '.onnx')}", flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(models.NAMES), help=f"comma-separated, from {', '.join(models.NAMES)}")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for NAME.onnx and NAME.npz")
    p.add_argument("--exporter", choices=EXPORTERS, default="auto")
    p.add_argument("--seed", type=int, default=0)
    opts = p.parse_args(argv)
    import torch

    names = [n.strip() for n in opts.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in models.WORKLOADS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(models.NAMES)}")
    exporter = resolve_exporter(opts.exporter)
    print(f"torch {torch.__version__}, exporter {exporter}, into {opts.out}", flush=True)
    for name in names:
        t0 = time.perf_counter()
        path = export(name, opts.out, exporter, opts.seed)
        print(f"{name:16s} {path.stat().st_size / 2**20:6.1f} MB  checked against eager PyTorch with ONNX Runtime  "
              f"{time.perf_counter() - t0:5.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
