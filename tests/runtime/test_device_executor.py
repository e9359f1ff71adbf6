"""The device graph executor without a device: a fake DeviceAPI (NumPy byte buffers that count
uploads) runs a model of opaque host steps and a kernel step whose launches it records."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.runtime.device_executor import DeviceGraphExecutor
from tensorforge.runtime.executor import ModelSpec


class FakeDevice:
    name = "fake"

    def __init__(self):
        self.uploads: list[int] = []
        self.launches: list[tuple] = []

    def alloc(self, nbytes):
        return np.zeros(nbytes, np.uint8)

    def upload(self, buf, array):
        self.uploads.append(array.nbytes)
        buf[:array.nbytes] = np.frombuffer(np.ascontiguousarray(array).tobytes(), np.uint8)

    def download(self, buf, array):
        array.reshape(-1).view(np.uint8)[:] = buf[:array.nbytes]

    def launch(self, symbol, grid, block, args):
        self.launches.append((symbol, grid, block, len(args)))

    def synchronize(self):
        pass


def _spec():
    values = {"x": {"shape": [2, 5], "dtype": "float32", "where": "input", "offset": 0},
              "w": {"shape": [5], "dtype": "float32", "where": "param", "offset": 0},
              "y": {"shape": [2, 5], "dtype": "float32", "where": "arena", "offset": 0},
              "vals": {"shape": [2, 2], "dtype": "float32", "where": "output", "offset": 0},
              "idx": {"shape": [2, 2], "dtype": "int64", "where": "output", "offset": 0}}
    steps = [{"kind": "kernel", "symbol": "k0", "args": ["x", "w", "y"]},
             {"kind": "opaque", "op": "topk", "attrs": {"k": 2, "axis": -1, "largest": 1, "sorted": 1},
              "inputs": ["x"], "outputs": ["vals", "idx"]}]
    return ModelSpec("m", ["x"], ["vals", "idx"], values, steps, 0, ["0:add", "1:topk"])


def test_params_upload_once_kernels_launch_with_workspaces_and_host_steps_round_trip():
    dev = FakeDevice()
    kernels = {"k0": {"launches": [["k0_kernel", [3, 1, 1], [64, 1, 1]]], "workspaces": [16]}}
    ex = DeviceGraphExecutor(_spec(), kernels, lambda: dev, {"w": np.ones(5, np.float32)})
    x = np.arange(10, dtype=np.float32).reshape(2, 5)[:, ::-1].copy()
    for _ in range(2):
        vals, idx = ex(x)
        np.testing.assert_array_equal(vals, [[4, 3], [9, 8]])
        np.testing.assert_array_equal(idx, [[0, 1], [0, 1]])
    assert dev.uploads.count(20) == 1                       # the param, once
    assert dev.launches == [("k0_kernel", (3, 1, 1), (64, 1, 1), 4)] * 2   # 3 buffers + 1 workspace


def test_device_is_opened_at_the_first_call_and_inputs_are_checked():
    opened = []

    def open_device():
        opened.append(1)
        raise RuntimeError("no CUDA device is available")

    ex = DeviceGraphExecutor(_spec(), {"k0": {"launches": [], "workspaces": []}}, open_device, {"w": np.ones(5, "f4")})
    assert not opened
    with pytest.raises(ValueError, match="expected shape"):
        ex(np.zeros((3, 5), np.float32))
    with pytest.raises(RuntimeError, match="no CUDA device"):
        ex(np.zeros((2, 5), np.float32))


def test_a_kernel_step_without_launches_is_refused():
    with pytest.raises(ValueError, match="has no launches"):
        DeviceGraphExecutor(_spec(), {}, FakeDevice, {})
