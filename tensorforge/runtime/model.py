"""A compiled model: the executor plus what is needed to export it as one file and load it back.

The exported file is a zip archive (no pickle): `model.json` (the ModelSpec), `kernels.so` (the
compiled library), `params.npz` (constants, read with allow_pickle=False) and `kernels.c` (the
source, for inspection).  `load()` needs only NumPy and the runtime; it checks the description
against the kernels' buffers and the arena (runtime/validate.py) before anything runs.  A model
file carries native code: load only files you trust.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import zipfile
from typing import TYPE_CHECKING, Any

import numpy as np

from ..ir import dtype as dt
from .executor import GraphExecutor, ModelSpec
from .validate import SpecError, validate_spec

if TYPE_CHECKING:
    from .device_model import DeviceModel

FORMAT_VERSION = 2      # 2: kernel steps record their buffers ("params"), checked at load


class ExecutorModel:
    """What every compiled model offers, delegated to its `executor` (host or device)."""

    executor: Any

    @property
    def input_names(self) -> list[str]:
        return self.executor.input_names

    @property
    def output_names(self) -> list[str]:
        return self.executor.output_names

    def __call__(self, *arrays):
        return self.executor(*arrays)

    def run(self, **named):
        return self.executor.run(**named)

    def profile(self, *arrays, repeat: int = 10) -> list[tuple[str, float]]:
        """(kernel label, mean seconds) per step, slowest first."""
        return self.executor.profile(*arrays, repeat=repeat)


class Model(ExecutorModel):
    """`model(*arrays)` or `model.run(name=array)` -> list of outputs in graph order."""

    def __init__(self, spec: ModelSpec, lib_path: str | None, params: dict, source: str = "", info: dict | None = None,
                 host_steps: dict | None = None):
        self.spec, self.lib_path, self.params, self.source = spec, lib_path, params, source
        self.info = info or {}
        self.executor = GraphExecutor(spec, lib_path, params, host_steps=host_steps)

    def export(self, path: str) -> str:
        """Write the model as one file; returns the path."""
        buf = io.BytesIO()
        save_params(buf, self.params)
        manifest = {"format": "tensorforge-model", "version": FORMAT_VERSION,
                    "spec": dataclasses.asdict(self.spec), "param_names": sorted(self.params)}
        tmp = f"{path}.tmp{os.getpid()}"
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("model.json", json.dumps(manifest, default=_jsonable))
            z.writestr("params.npz", buf.getvalue())
            if self.lib_path:
                with open(self.lib_path, "rb") as f:
                    z.writestr("kernels.so", f.read())
            z.writestr("kernels.c", self.source)
        os.replace(tmp, path)
        return path

    def __repr__(self) -> str:
        return (f"<tensorforge Model {self.spec.name}: inputs {self.input_names}, "
                f"{len(self.spec.steps)} steps>")


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return {"__ndarray__": x.tolist(), "dtype": x.dtype.name}
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, tuple):
        return list(x)
    raise TypeError(f"cannot serialize {type(x).__name__}")


def _restore(x):
    """JSON -> attribute values (lists back to tuples, arrays back to arrays)."""
    if isinstance(x, dict):
        if "__ndarray__" in x:
            return np.array(x["__ndarray__"], dtype=x["dtype"])
        return {k: _restore(v) for k, v in x.items()}
    if isinstance(x, list):
        return tuple(_restore(v) for v in x)
    return x


def load(path: str) -> Model | DeviceModel:
    """Load a model written by `Model.export` (or `DeviceModel.export`: a GPU model)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such model file: {path}")
    try:
        z = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise ValueError(f"{path} is not a tensorforge model file") from None
    with z:
        try:
            manifest = json.loads(z.read("model.json"))
        except KeyError:
            raise ValueError(f"{path} is not a tensorforge model file (no model.json)") from None
        except ValueError as err:
            raise ValueError(f"{path}: model.json is not valid JSON ({err})") from None
        if not isinstance(manifest, dict):
            raise ValueError(f"{path}: model.json is not a JSON object")
        if manifest.get("format") != "tensorforge-model":
            raise ValueError(f"{path} is not a tensorforge model file (format {manifest.get('format')!r})")
        if manifest.get("version") != FORMAT_VERSION:
            raise ValueError(f"{path}: model format v{manifest.get('version')} is not supported by this version "
                             f"(v{FORMAT_VERSION}); export the model again")
        try:
            with np.load(io.BytesIO(z.read("params.npz")), allow_pickle=False) as npz:
                params = {name: npz[f"p{k}"] for k, name in enumerate(manifest["param_names"])}
        except (KeyError, TypeError, ValueError, OSError, zipfile.BadZipFile) as err:
            raise ValueError(f"{path}: the model's parameters (params.npz) cannot be read: {err}") from None
        lib = z.read("kernels.so") if "kernels.so" in z.namelist() else None
        source = z.read("kernels.c").decode() if "kernels.c" in z.namelist() else ""
        spec = _spec(path, manifest)
        params = _typed_params(spec, params)
        try:
            validate_spec(spec, params)
        except SpecError as err:
            raise ValueError(f"{path}: the model description does not match its kernels: {err}") from None
        if "device" in manifest:            # a GPU model: its program instead of a library
            from .device_model import load_device_model
            return load_device_model(path, z, manifest, spec, params)
    if lib is None and any(st["kind"] == "kernel" for st in spec.steps):
        raise ValueError(f"{path}: the model has kernel steps but no kernels.so")
    lib_path = _materialize(lib) if lib is not None else None
    return Model(spec, lib_path, params, source)


def save_params(buf, params: dict) -> None:
    """params.npz: one array per param, in sorted name order.  NumPy's .npy format cannot describe
    the ml_dtypes types (bfloat16, float8, int4, ...), so those are stored as their bytes (unsigned
    integers of their width) and get their dtype back from the model description at load."""
    def storable(a: np.ndarray) -> np.ndarray:
        if a.dtype.name in dt.SCALAR_TYPES and dt.is_extension(a.dtype.name):
            return a.view(f"u{a.dtype.itemsize}")
        return a
    np.savez(buf, **{f"p{k}": storable(params[name]) for k, name in enumerate(sorted(params))})


def _typed_params(spec: ModelSpec, params: dict) -> dict:
    """Params with their dtypes back: the bytes `save_params` stored for an ml_dtypes type,
    reinterpreted as the dtype the model description gives."""
    out = dict(params)
    for name, array in params.items():
        info = spec.values.get(name)
        want = info.get("dtype") if isinstance(info, dict) else None
        if isinstance(want, str) and want in dt.SCALAR_TYPES and dt.is_extension(want) \
                and array.dtype.kind in "uV" and dt.to_numpy(want).itemsize == array.dtype.itemsize:
            out[name] = array.view(dt.to_numpy(want))
    return out


def _spec(path: str, manifest) -> ModelSpec:
    try:
        raw = manifest["spec"]
        steps = []
        for st in raw["steps"]:
            if isinstance(st, dict) and st.get("kind") == "opaque":
                st = dict(st, attrs=_restore(st["attrs"]))
            steps.append(st)
        return ModelSpec(raw["name"], raw["inputs"], raw["outputs"], raw["values"], steps, raw["arena_bytes"],
                         raw["labels"], raw.get("runs", []))
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise ValueError(f"{path}: the model description (model.json) is incomplete or malformed: "
                         f"{type(err).__name__} {err}") from None


def _materialize(lib: bytes) -> str:
    """Write a library to the cache by content hash (atomically) and return its path.  A file
    already there is used only when its size and checksum match `lib`; a damaged one (a
    truncated copy would crash the process with SIGBUS when loaded) is written again, with a
    warning."""
    from .cache_files import DamagedEntry, cache_dir, check_file, warn_rebuild, write_atomic
    digest = hashlib.sha256(lib).hexdigest()
    path = cache_dir() / f"model_{digest[:32]}.so"
    if path.exists():
        try:
            return check_file(path, len(lib), digest)
        except DamagedEntry as err:
            warn_rebuild(err, "writing the model's library again")
    write_atomic(path, lib)
    return str(path)
