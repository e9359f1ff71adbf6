"""`demo --precision bf16` and `inspect --precision bf16` print the accuracy against fp32 next to
the speed, and the units that ran the products."""
import re

import pytest
from test_cli import small_model

from tensorforge import cli

pytest.importorskip("ml_dtypes")


def _check(out: str) -> None:
    m = re.search(r"# bf16 against fp32 over 20 random inputs: max abs error (\S+), relative L2 error (\S+), "
                  r"same top-1 on (\d+)/20", out)
    assert m, out
    assert float(m.group(2)) < 2e-2 and int(m.group(3)) >= 15
    assert "# products on: " in out and ("vdpbf16ps" in out or "bf16-rounded operands" in out)
    assert re.search(r"# latency: fp32 \S+ ms, bf16 \S+ ms", out)


def test_inspect_precision_bf16(tmp_path, capsys):
    small_model(tmp_path / "m.onnx")
    assert cli.main(["inspect", str(tmp_path / "m.onnx"), "--precision", "bf16"]) == 0
    _check(capsys.readouterr().out)


def test_demo_precision_bf16(capsys):
    assert cli.main(["demo", "--model", "dqn", "--precision", "bf16"]) == 0
    _check(capsys.readouterr().out)


def test_unknown_precision_is_a_usage_error(capsys):
    assert cli.main(["demo", "--model", "dqn", "--precision", "fp8"]) == 2
