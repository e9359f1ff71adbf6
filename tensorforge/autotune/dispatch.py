"""Record application (the `records -> configs` arrow at compile time): the best tuning record
of each fused group's task becomes the config its kernel is lowered with.

Only records measured with the thread count the model will run with apply: a schedule tuned
for one core can lose on two.  `tensorforge.compile(..., records=...)` calls `apply_records`.
"""
from __future__ import annotations

import logging
import warnings

from ..te.space import ConfigError
from .records import _records, best_configs
from .task import task_of_group


def apply_records(groups, records, target, threads: int) -> dict:
    """{id(group): best ConfigEntity} for the groups whose task has a successful record in
    `records` (a path or records) measured with `threads` threads (or with no thread count
    recorded); the others keep their default schedules, and a warning says when records exist
    only for another thread count."""
    all_records = list(_records(records))
    tasks = [(g, task_of_group(g, target)) for g in groups]
    tasks = [(g, t) for g, t in tasks if t is not None]
    bad: set = set()        # ids of records whose config does not fit their task's space
    while True:
        usable = [r for r in all_records if id(r) not in bad]
        best = best_configs(usable, target=target, threads=threads)
        anywhere = best_configs(usable, target=target)
        configs, elsewhere, before = {}, set(), len(bad)
        for g, task in tasks:
            record = best.get(task.key)
            if record is not None:
                try:
                    configs[id(g)] = task.config_space.from_json(record.config)
                except ConfigError:
                    bad.add(id(record))        # skip it: the next best record of the task competes
            elif task.key in anywhere:
                elsewhere.add(anywhere[task.key].threads)
        if len(bad) == before:
            break
    log = logging.getLogger("tensorforge")
    if bad:
        warnings.warn(f"skipped {len(bad)} tuning record(s) whose config is not valid for its kernel's "
                      "schedule template", RuntimeWarning, stacklevel=3)
    log.info("tuning records applied to %d of %d tunable kernels", len(configs), len(tasks))
    if elsewhere:
        log.warning("some kernels have tuning records only for %s thread(s), not for the %d this process "
                    "uses: they keep their default schedules (tune with --threads %d)",
                    "/".join(str(n) for n in sorted(elsewhere)), threads, threads)
    return configs
