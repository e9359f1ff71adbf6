"""The auto-tuner on the accelerator: candidates of `conv2d.accel` are built for target "accel",
checked against the template's NumPy reference and timed by the backend's timer, which is the
simulator's cycle count at the configured clock.  On a 3x3 layer it picks 2 virtual threads."""
from __future__ import annotations

from tensorforge.autotune import Task, load_records, tune


def test_tuning_measures_simulated_cycles_and_picks_two_virtual_threads(tmp_path):
    # ResNet-18's C6 shape (128 -> 128 channels, 28x28, 3x3, pad 1) in the blocked layouts
    task = Task.create("conv2d.accel", [((1, 8, 28, 28, 1, 16), "int8"), ((8, 8, 3, 3, 16, 16), "int8"),
                                        ((8, 1, 16), "int32")],
                       {"strides": 1, "padding": 1, "shift": 8}, target="accel")
    records = tmp_path / "accel.jsonl"
    tune([task], trials=8, records=str(records), tuner="random", seed=0, log=False)
    done = [r for r in load_records(str(records)) if r.ok]
    assert len(done) >= 4
    # the simulator is deterministic: every repeat of a candidate takes the same simulated time
    assert all(len(set(r.costs)) == 1 for r in done)
    best = min(done, key=lambda r: r.cost)
    assert best.config["threads"] == 2
    one_thread = min(r.cost for r in done if r.config["threads"] == 1)
    assert best.cost < one_thread
