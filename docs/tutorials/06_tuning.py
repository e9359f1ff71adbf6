"""Lesson 6: tuning.

Every tunable schedule template declares a space of configs (lesson 5).  Auto-tuning measures
configs of each *task* (one template on one set of input shapes) and keeps the fastest:

  tasks   = tensorforge.autotune.extract_tasks(graph)          # the distinct tunable kernels
  results = tensorforge.autotune.tune(tasks, trials=..., records="tune.jsonl")
  model   = tensorforge.compile(graph, records="tune.jsonl")   # applies the best record per task

A tuner proposes configs ("random", "grid", "ga", or "xgb": a cost model trained on loop-program
features, searched by simulated annealing); a builder compiles them in parallel processes; a
runner checks each against the NumPy reference and times it.  Results are appended to a
JSON-lines records file as they come, so a run can stop and resume, and `compile` reads it.
Tuning only picks knob values: the tuned model computes the same values as the default one.

Some ops can also run as another algorithm: a 3x3 stride-1 conv as the direct conv or as a
Winograd conv with 2x2 or 4x4 output tiles, each a kernel with a task of its own.  With
`extract_tasks(graph, alternatives=True)` (what `tensorforge tune` does) the forms the graph
does not run by default are tuned too, and `compile` runs each conv as the form whose best
record is fastest; `model.info["algorithms"]` lists the convs it moved off the default form.

This lesson tunes a tiny two-layer network with a handful of trials per task (real runs use
hundreds, or `time_budget="10m"`), prints what was measured, compiles with the records and
checks the result.  Measurement runs in processes started with "spawn", which import the main
module again: a script that calls tune() needs the `if __name__ == "__main__":` guard below.

Run it:  python docs/tutorials/06_tuning.py        (TUTORIAL_TRIALS=32 for a longer search)
"""
import os
import tempfile

import numpy as np

import tensorforge
from tensorforge.autotune import LocalBuilder, LocalRunner, best_configs, extract_tasks, load_records, tune
from tensorforge.graph.builder import GraphBuilder

TRIALS = int(os.environ.get("TUTORIAL_TRIALS", "4"))


def two_layer_net(rng):
    """x (8 x 64) -> dense 64 -> relu -> dense 32."""
    b = GraphBuilder("mlp")
    x = b.input("x", (8, 64), "float32")
    w1 = b.const(rng.standard_normal((64, 64)).astype("float32") * 0.1, "w1")
    w2 = b.const(rng.standard_normal((32, 64)).astype("float32") * 0.1, "w2")
    h = b.add1("relu", [b.add1("dense", [x, w1])])
    return b.finish([b.add1("dense", [h, w2])]), w1, w2


def main() -> None:
    rng = np.random.default_rng(0)
    graph, w1, w2 = two_layer_net(rng)

    # The tasks: each fused group whose main op has a tunable template with knobs.
    tasks = extract_tasks(graph, target="c")
    for task in tasks:
        print(f"{task}: {task.config_space.size} configs, {task.flops} flops")

    with tempfile.TemporaryDirectory() as tmp:
        records = os.path.join(tmp, "tune.jsonl")
        # Small measurements for a quick run: one build process, two timed runs per config.
        results = tune(tasks, trials=TRIALS, records=records, tuner="random",
                       builder=LocalBuilder(n_parallel=1), runner=LocalRunner(number=2, repeat=2),
                       log=print)
        for task, result in results.items():
            assert result.trials >= 1 and result.config is not None, f"{task}: nothing ran correctly"
            print(f"{task.name}: best {result.cost * 1e6:.1f} us ({result.config}), "
                  f"default {result.default_cost * 1e6:.1f} us, {result.trials} trials")

        # The records file: one JSON line per measured config.
        lines = load_records(records)
        best = best_configs(records)
        print(f"{len(lines)} records, best config for {len(best)} task(s)")
        assert len(best) == len(tasks)

        # Compile with the records and check: tuned or not, the values are the same.
        model = tensorforge.compile(graph, target="c", records=records)
        x = rng.standard_normal((8, 64)).astype("float32")
        (y,) = model(x)
        want = np.maximum(x @ graph.params[w1].T, 0) @ graph.params[w2].T
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        print("the tuned model matches NumPy")


if __name__ == "__main__":
    main()
