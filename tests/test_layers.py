"""The package imports downward only (DESIGN.md, "Layers import downward").

Every import in the package, also those inside functions, is read from the source with `ast`
and mapped to the layer of the module it names.  A module may import its own layer and the
layers below it, never a layer above.  A compiled model that is loaded from a file needs only
the runtime (and the dtypes and shape expressions of `ir`); library code never imports
`testing`.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tensorforge

ROOT = Path(tensorforge.__file__).parent

# Lowest first.  A module's layer is that of its longest listed prefix.
LAYERS: list[set[str]] = [
    {"ir", "errors", "backends.registry"},   # the registry of target kinds: plain data
    {"runtime"},
    {"arith", "target"},
    {"te"},
    {"tir"},
    {"ops"},
    {"graph"},
    {"codegen"},
    {"backends"},
    # record application (autotune.dispatch and what it reads) sits with lowering: compile
    # applies records without importing the tuner
    {"frontend", "lowering", "parallel_lowering", "build_module", "shape_generic", "calibrate", "autotune.dispatch", "autotune.algorithms", "autotune.records",
     "autotune.task"},
    {"driver", "build_records", "compile_progress", "staged", "batch_buckets", "sequence_buckets", "frontend.torch_dynamo"},   # torch_dynamo compiles what it converts
    {"autotune", "testing", "ops.testing"},
    {"cli"},               # with the package's __init__ (the public API, loaded lazily)
]
TOP = len(LAYERS) - 1


def layer_of(module: str) -> int:
    """Layer of `module` ("tensorforge.a.b"): the one listing its longest prefix."""
    parts = module.split(".")[1:]
    if not parts:
        return TOP
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        for k, names in enumerate(LAYERS):
            if name in names:
                return k
    raise AssertionError(f"{module} belongs to no layer: add its package to LAYERS")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: Path):
    """(line, imported module) for every import of a tensorforge module in `path`."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("tensorforge"):
                continue
            if node.module is None:       # from . import a, b: a module each, or the package's names
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    yield node.lineno, sub if _is_module(sub) else target
            else:
                yield node.lineno, target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tensorforge"):
                    yield node.lineno, alias.name


def upward_imports() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        mine = layer_of(module)
        for line, target in _imports(path):
            if target == "tensorforge":
                theirs = TOP
            else:
                theirs = layer_of(target)
            if theirs > mine:
                found.append(f"{path.relative_to(ROOT.parent)}:{line}: {module} (layer {mine}) "
                             f"imports {target} (layer {theirs})")
    return found


def test_no_module_imports_a_higher_layer():
    assert upward_imports() == []


def test_library_code_never_imports_testing():
    """Only the command line may: `tensorforge demo` runs the model zoo of testing/."""
    bad = [f"{p.relative_to(ROOT.parent)}:{line}" for p in ROOT.rglob("*.py")
           if not _module_name(p).startswith(("tensorforge.testing", "tensorforge.cli"))
           for line, target in _imports(p) if target.startswith("tensorforge.testing")]
    assert bad == []


def test_the_checker_sees_an_upward_import(tmp_path):
    """The test above can fail: an import of the driver from `ir` is reported."""
    fake = tmp_path / "tensorforge" / "ir" / "bad.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def f():\n    from ..driver import compile\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path / "tensorforge"
    try:
        assert [m.split(": ", 1)[1] for m in upward_imports()] == [
            "tensorforge.ir.bad (layer 0) imports tensorforge.driver (layer 10)"]
    finally:
        ROOT = saved


def test_a_loaded_model_needs_only_the_runtime(tmp_path):
    """Export a model, then load and run it in a fresh process: only runtime/ and ir/ load."""
    import numpy as np

    from tensorforge.graph.builder import GraphBuilder

    b = GraphBuilder("tiny")
    x = b.input("x", (2, 3), "float32")
    y = b.add1("relu", [b.add1("add", [x, b.const(np.ones((2, 3), "float32"), "one")])])
    path = tensorforge.compile(b.finish([y])).export(str(tmp_path / "tiny.tfm"))
    code = ("import sys, numpy as np, tensorforge\n"
            f"m = tensorforge.load({path!r})\n"
            "out = m(np.full((2, 3), -0.5, np.float32))[0]\n"
            "assert np.allclose(out, 0.5), out\n"
            "print(sorted({n.split('.')[1] for n in sys.modules if n.startswith('tensorforge.')}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['ir',", "'runtime']"]
