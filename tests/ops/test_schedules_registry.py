"""The one schedule-template registry (ops/schedules/__init__.py): plain and tunable group
templates and workload templates under one name space, the checks made at registration, and
the layering it allows (ops/ and the knob space below autotune/)."""
import ast
import pathlib
import subprocess
import sys

import pytest

import tensorforge
from tensorforge.ops import schedules
from tensorforge.ops.schedules import (
    Template,
    get_template,
    get_tunable,
    require_tunable,
    template,
    tunable_names,
    workload_template,
)

PACKAGE = pathlib.Path(tensorforge.__file__).parent


@pytest.fixture
def registry(monkeypatch):
    """A copy of the registry for the test to add to (the real one is left as it was)."""
    monkeypatch.setattr(schedules, "_TEMPLATES", dict(schedules._TEMPLATES))


def test_a_tunable_template_is_the_schedule_template_lowering_calls():
    for name in ("conv2d_nchwc.cpu", "matmul.cpu", "matmul_packed.cpu", "window2d_nchwc.cpu",
                 "conv2d_winograd_nchwc.cpu", "conv_transpose2d_nchwc.cpu"):
        t = get_tunable(name)
        assert isinstance(t, Template) and t.tunable and t.kind == "group"
        assert get_template(name) is t.fn
        assert t.module.startswith("tensorforge.ops.schedules.")
    assert set(tunable_names()) >= {"conv2d_nchwc.cpu", "matmul.cpu", "window2d_nchwc.cpu"}


def test_a_plain_template_is_not_tunable():
    assert get_template("injective.cpu") is not None
    assert get_tunable("injective.cpu") is None
    assert "injective.cpu" not in tunable_names()
    with pytest.raises(KeyError, match="'injective.cpu' is not tunable"):
        require_tunable("injective.cpu")
    with pytest.raises(KeyError, match="'nothing.cpu' is not registered"):
        require_tunable("nothing.cpu")
    with pytest.raises(KeyError, match="unknown schedule template 'nothing.cpu'"):
        get_template("nothing.cpu")


def test_template_declares_and_applies_knobs(registry):
    from tensorforge import te
    from tensorforge.target import Target
    from tensorforge.te.space import ConfigSpace, as_config

    @template("knobs_test.cpu", tunable=True)
    def knobs(s, master_outs, outs, target, cfg=None):
        cfg = as_config(cfg)
        (x,) = s[outs[0]].op.axis
        cfg.define_split("tile", 32, 2, policy="factors", default=(8,))
        cfg["tile"].apply(s, s[outs[0]], x)

    a = te.placeholder((32,), name="a")
    b = te.compute((32,), lambda i: a[i] + 1, name="b")
    space = ConfigSpace()
    get_tunable("knobs_test.cpu").fn(te.create_schedule(b.op), [b], [b], Target.parse("c"), space)
    assert space.size == 6 and space.default_config().to_json() == {"tile": [4, 8]}


def test_a_name_is_registered_once(registry):
    @template("twice_test.cpu")
    def first(s, master_outs, outs, target, cfg=None):
        pass

    with pytest.raises(ValueError, match="'twice_test.cpu' is registered twice"):
        @template("twice_test.cpu", tunable=True)
        def second(s, master_outs, outs, target, cfg=None):
            pass

    with pytest.raises(ValueError, match="registered twice"):
        @workload_template("injective.cpu", reference=lambda a: a)
        def third(cfg, target, inputs):
            pass


def test_a_workload_template_needs_a_reference_and_is_not_a_schedule_template(registry):
    with pytest.raises(ValueError, match="'nameless_test' needs a NumPy reference"):
        workload_template("nameless_test", reference=None)

    @workload_template("workload_test", reference=lambda a: a)
    def workload(cfg, target, inputs):
        pass

    t = require_tunable("workload_test")
    assert t.kind == "workload" and t.tunable and t.reference(3) == 3
    with pytest.raises(KeyError):
        get_template("workload_test")       # no group template: lowering cannot call it


def _imports(path: pathlib.Path) -> set[str]:
    """The absolute names of the modules `path` imports (relative imports resolved)."""
    package = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            found.add(".".join(base + ([node.module] if node.module else [])))
    return found


@pytest.mark.parametrize("where", ["ops", "te"])
def test_ops_and_the_knob_space_do_not_import_autotune(where):
    """Templates declare their knobs with te/space.py; nothing below autotune/ reaches up to it."""
    offenders = {str(p.relative_to(PACKAGE)): sorted(m for m in _imports(p) if m.startswith("tensorforge.autotune"))
                 for p in (PACKAGE / where).rglob("*.py")}
    assert {p: m for p, m in offenders.items() if m} == {}


def test_loading_every_template_leaves_autotune_unimported():
    code = ("import sys; from tensorforge.ops import schedules; schedules.tunable_names(); "
            "print(sorted(m for m in sys.modules if m.startswith('tensorforge.autotune')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
