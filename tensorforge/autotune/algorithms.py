"""Algorithm choice from tuning records: the form each 3x3 stride-1 conv runs as.

A 3x3 stride-1 conv on blocked data can run as the direct conv or as a Winograd conv with 2x2
or 4x4 output tiles (graph/passes/alter_layout_winograd.py).  The pass's rule picks one by the
layer's channels and map size; which is fastest also depends on the machine (one FMA unit or
two, cache sizes).  Each form is a kernel with a task of its own, so tuning can measure all of
them, and compile can run each conv as the form whose best record is fastest:

  `tensorforge tune` (`extract_tasks(..., alternatives=True)`) tunes, beside the model's kernels,
  those of the forms the rule did not pick (`forced`: every eligible conv as one form);
  `driver.compile(records=...)` optimizes the graph with a `RecordChoice`, which replaces the
  rule's pick when another form's best record is at least MARGIN faster.

The forms are compared by their times in the model where every form has one (the confirmation
in the model, stage "model": `tensorforge tune` times each form's kernels in the model with the
convs in that form), else by their times alone (the search and its side-by-side confirmation):
alone, with inputs and weights hot or flushed, a Winograd kernel can look faster than where it
runs (ResNet-18's 14x14 layer with 4x4 tiles: 0.43 ms alone, flushed, and 0.60 ms in the model).
A rule's pick without a record, or with no other form timed the same way, stays.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .records import Record, _records, best_configs
from .task import Task

# another form replaces the rule's pick only when its best record takes at most this share of
# the pick's: two kernels tuned at different moments differ by a few per cent on a quiet machine
MARGIN = 0.97


def form_name(tile: int) -> str:
    """How a form is named in messages."""
    return "direct" if tile == 0 else f"Winograd F({tile}x{tile})"


@dataclass(frozen=True)
class FormChange:
    """A conv that runs as another form than the rule's: the two tile sizes (0: direct), and
    per form with records its best time (seconds per run) and task key."""

    default: int
    chosen: int
    seconds: dict
    keys: dict

    def describe(self) -> str:
        return (f"{form_name(self.chosen)} instead of {form_name(self.default)} "
                f"({self.seconds[self.chosen] * 1e3:.3f} ms against {self.seconds[self.default] * 1e3:.3f} ms)")


class RecordChoice:
    """A tile chooser (`choosing_tiles`) that picks each conv's form by its best records at
    `threads` threads; `changes` holds a FormChange for every conv that runs as another form
    than the rule's."""

    def __init__(self, records: str | Iterable[Record], target, threads: int | None):
        records = list(_records(records))

        def best(rs: list) -> dict:
            return {key: r.cost for key, r in best_configs(rs, target=target, threads=threads).items()}
        self.in_model = best([r for r in records if r.stage == "model"])
        self.alone = best([r for r in records if r.stage != "model"])
        self.target = target
        self.changes: list[FormChange] = []

    def __call__(self, forms: dict, default: int) -> int:
        keys = {}
        for tile, (op, inputs, attrs) in forms.items():
            try:
                keys[tile] = Task.for_op(op, inputs, attrs, self.target).key
            except (ValueError, TypeError):
                continue
        for table in (self.in_model, self.alone):
            timed = {tile: table[key] for tile, key in keys.items() if key in table}
            if default in timed and len(timed) > 1:
                break
        else:
            return default
        best = min(timed, key=timed.__getitem__)
        if best == default or timed[best] > MARGIN * timed[default]:
            return default
        self.changes.append(FormChange(default, best, timed, {tile: keys[tile] for tile in timed}))
        return best


def is_form(task: Task) -> bool:
    """Whether `task` is the kernel of one of a 3x3 stride-1 conv's forms (a Winograd conv, or a
    direct conv with a 3x3 kernel, stride 1 and dilation 1)."""
    if task.op == "conv2d_winograd_nchwc":
        return True
    attrs = dict(task.attrs)
    weight = task.inputs[1][0] if len(task.inputs) > 1 and task.inputs[1] is not None else ()
    return (task.op == "conv2d_nchwc" and len(weight) == 5 and tuple(weight[2:4]) == (3, 3)
            and tuple(attrs.get("strides", (1, 1))) == (1, 1) and tuple(attrs.get("dilations", (1, 1))) == (1, 1))


def forced(tile: int):
    """A tile chooser that runs every eligible conv as the form `tile` (0: direct)."""
    return lambda forms, default: tile if tile in forms else default
