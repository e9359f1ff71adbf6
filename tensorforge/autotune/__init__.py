"""Auto-tuning, beside the spine: fused groups -> tasks -> config spaces -> measured candidates
-> JSON-lines records -> the best config per task, applied by `tensorforge.compile(graph,
records=path)` (driver.py; the other tasks keep their default schedules).

    tasks = tensorforge.autotune.extract_tasks(graph, target="c")
    best = tensorforge.autotune.tune(tasks, time_budget="10m", records="tune.jsonl", confirm=3)
    model = tensorforge.compile(graph, target="c", records="tune.jsonl")

The knobs and config spaces (ConfigSpace, ConfigEntity) are te/space.py; the tunable templates
are registered with the schedule templates, `@template(name, tunable=True)` and
`@workload_template(name, reference=...)` in ops/schedules/.
Modules: task.py (Task, extract_tasks, build_candidate), measure.py (LocalBuilder, LocalRunner),
records.py (record files), tuners.py (random, grid, genetic), tuner.py (the tuning loop: tune,
confirm), features.py (loop-program features),
cost_model.py (CostModel, XGBoostCostModel), search.py (simulated annealing, ModelBasedTuner:
tuner="xgb"), pool.py (DaskRunner: measuring on a Dask distributed pool), progress.py
(live progress), report.py (record summaries and curves).
Names are imported on first use, so `import tensorforge` stays light.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "ConfigSpace": "tensorforge.te.space", "ConfigEntity": "tensorforge.te.space",
    "ConfigError": "tensorforge.te.space",
    "Task": "task", "extract_tasks": "task", "instantiate": "task", "build_candidate": "task",
    "LocalBuilder": "measure", "LocalRunner": "measure", "MeasureInput": "measure",
    "MeasureResult": "measure", "BuildResult": "measure", "ErrorKind": "measure",
    "Record": "records", "RecordWriter": "records", "load_records": "records",
    "best_configs": "records", "measured_keys": "records",
    "tune": "tuner", "TuneResult": "tuner", "RandomTuner": "tuners", "GridTuner": "tuners",
    "GATuner": "tuners", "make_tuner": "tuners",
    "CostModel": "cost_model", "XGBoostCostModel": "cost_model",
    "extract_features": "features", "FeatureExtractor": "features", "feature_names": "features",
    "ModelBasedTuner": "search", "simulated_annealing": "search",
    "DaskRunner": "pool", "add_pool_commands": "pool",
    "summarize": "report", "plot_curves": "report", "parse_duration": "tuner", "confirm": "tuner",
    "confirm_in_model": "model_confirm",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tensorforge.autotune' has no attribute {name!r}")
    value = getattr(importlib.import_module(module if "." in module else f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
