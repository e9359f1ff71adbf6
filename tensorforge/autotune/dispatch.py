"""Record application (the `records -> configs` arrow at compile time): the best tuning record
of each fused group's task becomes the config its kernel is lowered with.

Only records measured with the thread count the model will run with apply: a schedule tuned
for one core can lose on two.  `tensorforge.compile(..., records=...)` calls `apply_records`.
"""
from __future__ import annotations

import logging

from .records import _records, best_configs
from .task import task_of_group


def apply_records(groups, records, target, threads: int) -> dict:
    """{id(group): best ConfigEntity} for the groups whose task has a successful record in
    `records` (a path or records) measured with `threads` threads (or with no thread count
    recorded); the others keep their default schedules, and a warning says when records exist
    only for another thread count."""
    all_records = list(_records(records))
    best = best_configs(all_records, target=target, threads=threads)
    anywhere = best_configs(all_records, target=target)
    configs, tunable, elsewhere = {}, 0, set()
    for g in groups:
        task = task_of_group(g, target)
        if task is None:
            continue
        tunable += 1
        record = best.get(task.key)
        if record is not None:
            configs[id(g)] = task.config_space.from_json(record.config)
        elif task.key in anywhere:
            elsewhere.add(anywhere[task.key].threads)
    log = logging.getLogger("tensorforge")
    log.info("tuning records applied to %d of %d tunable kernels", len(configs), tunable)
    if elsewhere:
        log.warning("some kernels have tuning records only for %s thread(s), not for the %d this process "
                    "uses: they keep their default schedules (tune with --threads %d)",
                    "/".join(str(n) for n in sorted(elsewhere)), threads, threads)
    return configs
