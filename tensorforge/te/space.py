"""Knobs and configuration spaces: the `template -> space of schedules` arrow of the
auto-tuner.  It lives beside the schedule it acts on (it needs only ir/ and te/schedule.py),
so the schedule templates of ops/schedules/ declare their knobs without importing autotune/.

A tunable template (`@template(name, tunable=True)`, ops/schedules/) is one function that both
declares its knobs and applies them:

    cfg.define_split("tile_x", x, num_outputs=2, policy="factors", default=(7, 8))
    xo, xi = cfg["tile_x"].apply(s, s[C], x)
    cfg.define_knob("unroll", [True, False])
    if cfg["unroll"].val: s[C].unroll(xi)

Called with a `ConfigSpace` ("collecting" mode) the template records every knob and schedules
with each knob's default, so the collecting call *is* the template's heuristic default
schedule, and that default is one point of the space by construction.  Called with a
`ConfigEntity` (one point of a space) the same code schedules with that point's values.

A space is the product of its knobs.  A point is a tuple of per-knob choices; its `index` is
that tuple read as a mixed-radix number (the first knob is the least significant digit), its
JSON form is a dict of knob values (`{"tile_x": [7, 8], "unroll": true}`), which round-trips
through `ConfigSpace.from_json`.  `neighbors` and `mutate` change one knob at a time (the
moves of simulated annealing and of the genetic tuner).

Entities (knob values) follow TVM: a split is a tuple of sizes, outermost first
(`SplitEntity.apply` returns the new axes); a reorder is a permutation of the given axes;
an annotation is one of "none", "unroll", "vec", "parallel" per axis; a plain knob is a value.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, replace
from random import Random
from typing import Any, Callable, Iterator, Sequence

from ..ir.expr import IntImm, IterVar
from .schedule import Stage

ANNOTATIONS = ("none", "unroll", "vec", "parallel")
SPLIT_POLICIES = ("factors", "power2", "candidate")
REORDER_POLICIES = ("all", "candidates")
ANNOTATE_POLICIES = ("try_unroll", "try_vec", "try_unroll_vec", "try_parallel", "candidates")
MAX_REORDER_AXES = 8          # 8! = 40320 permutations


class ConfigError(ValueError):
    """A knob definition or a config does not fit its space; the message names the knob."""


# Entities: the value of one knob ------------------------------------------------------------

def _stage(sch, stage) -> Stage:
    return stage if isinstance(stage, Stage) else sch[stage]


@dataclass(frozen=True)
class SplitEntity:
    """Sizes of the axes a split produces, outermost first (the outermost is the ceiling of
    extent / product of the others)."""

    size: tuple

    def apply(self, sch, stage, axis: IterVar) -> list:
        """Split `axis` of `stage` (a Stage, or a tensor/op of `sch`); returns the new axes,
        outermost first."""
        st = _stage(sch, stage)
        axes = []
        for k in range(len(self.size) - 1):
            outer, axis = st.split(axis, factor=math.prod(self.size[k + 1:]))
            axes.append(outer)
        return axes + [axis]

    def to_json(self) -> list:
        return list(self.size)


@dataclass(frozen=True)
class ReorderEntity:
    """A permutation: position k of the new order holds axis `perm[k]` of the given axes."""

    perm: tuple

    def apply(self, sch, stage, axes: Sequence[IterVar]) -> list:
        """Reorder `axes` of `stage`; returns them in their new order."""
        ordered = [axes[k] for k in self.perm]
        _stage(sch, stage).reorder(*ordered)
        return ordered

    def to_json(self) -> list:
        return list(self.perm)


@dataclass(frozen=True)
class AnnotateEntity:
    """One annotation per axis: "none", "unroll", "vec" or "parallel"."""

    anns: tuple

    def apply(self, sch, stage, axes: Sequence[IterVar]) -> list:
        st = _stage(sch, stage)
        for ax, ann in zip(axes, self.anns):
            if ann == "unroll":
                st.unroll(ax)
            elif ann == "vec":
                st.vectorize(ax)
            elif ann == "parallel":
                st.parallel(ax)
        return list(axes)

    def to_json(self) -> list:
        return list(self.anns)


@dataclass(frozen=True)
class OtherOptionEntity:
    """The value of a `define_knob` knob."""

    val: Any

    def to_json(self) -> Any:
        return self.val


# Knobs: a name and the list of its entities -------------------------------------------------

@dataclass(frozen=True)
class Knob:
    name: str
    kind: str                  # split | reorder | annotate | knob
    entities: tuple
    default_index: int = 0

    def __len__(self) -> int:
        return len(self.entities)

    def index_of(self, value: Any) -> int:
        """Index of the entity whose JSON form is `value` (lists and tuples alike)."""
        want = _normalize(value)
        for k, e in enumerate(self.entities):
            if _normalize(e.to_json()) == want:
                return k
        shown = ", ".join(json.dumps(e.to_json()) for e in self.entities[:8])
        more = f", ... ({len(self.entities)} in all)" if len(self.entities) > 8 else ""
        raise ConfigError(f"knob {self.name!r}: {json.dumps(_normalize(value))} is not one of its "
                          f"values: {shown}{more}")

    def describe(self) -> str:
        default = json.dumps(self.entities[self.default_index].to_json())
        return f"{self.name} ({self.kind}, {len(self)} values, default {default})"


def _normalize(value: Any) -> Any:
    """JSON value with tuples as lists, for comparing a given value with an entity's."""
    return json.loads(json.dumps(value))


def _extent(axis_or_extent: Any, what: str) -> int:
    if isinstance(axis_or_extent, IterVar):
        dom = axis_or_extent.dom
        if dom is None or not isinstance(dom.extent, IntImm):
            raise ConfigError(f"{what}: axis {axis_or_extent.name} has no constant extent (an axis "
                              "made by split/fuse has none yet); pass the extent as an int")
        return int(dom.extent.value)
    if isinstance(axis_or_extent, bool) or not isinstance(axis_or_extent, int) or axis_or_extent < 1:
        raise ConfigError(f"{what}: expected an axis or a positive extent, got {axis_or_extent!r}")
    return axis_or_extent


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def split_entities(extent: int, num_outputs: int, policy: str, allow_tail: bool,
                   max_factor: int | None = None, candidates: Sequence | None = None,
                   filter: Callable[[SplitEntity], bool] | None = None) -> list[SplitEntity]:
    """All splits of `extent` into `num_outputs` axes under `policy`.

    factors: every inner size divides what is left (no tails); with allow_tail every size from 1.
    power2:  inner sizes are powers of two; without allow_tail their product divides `extent`.
    candidate: the given size tuples (outermost may be -1; it is recomputed).
    Inner sizes are at most `max_factor`, and their product at most `extent`."""
    if num_outputs < 2:
        raise ConfigError(f"a split needs num_outputs >= 2, got {num_outputs}")
    inner_count = num_outputs - 1
    if policy == "candidate":
        if not candidates:
            raise ConfigError("policy 'candidate' needs a non-empty candidates list")
        inners = []
        for c in candidates:
            c = tuple(int(v) for v in c)
            if len(c) == num_outputs:
                c = c[1:]
            if len(c) != inner_count or any(v < 1 for v in c):
                raise ConfigError(f"split candidate {c} does not give {num_outputs} positive sizes")
            inners.append(c)
    elif policy in ("factors", "power2"):
        cap = min(extent, max_factor or extent)
        if policy == "factors":
            values = list(range(1, cap + 1)) if allow_tail else [d for d in _divisors(extent) if d <= cap]
        else:
            values = [1 << p for p in range(cap.bit_length()) if (1 << p) <= cap]
        inners = []

        def choose(prefix: tuple, left: int) -> None:
            if len(prefix) == inner_count:
                inners.append(prefix)
                return
            for v in values:
                if v > left or (not allow_tail and left % v):
                    continue
                choose(prefix + (v,), left // v)

        choose((), extent)
    else:
        raise ConfigError(f"unknown split policy {policy!r}; use one of {SPLIT_POLICIES}")
    out, seen = [], set()
    for inner in inners:
        product = math.prod(inner)
        if not allow_tail and extent % product:
            raise ConfigError(f"split candidate {inner} does not divide extent {extent} "
                              "(pass allow_tail=True to allow a tail)")
        e = SplitEntity((-(-extent // product),) + inner)
        if e not in seen and (filter is None or filter(e)):
            seen.add(e)
            out.append(e)
    if not out:
        raise ConfigError(f"no split of extent {extent} into {num_outputs} is left "
                          f"(policy {policy!r}, max_factor {max_factor}, filter)")
    return out


# The space ---------------------------------------------------------------------------------

class _Defines:
    """The knob-declaring methods shared by ConfigSpace (records) and ConfigEntity (checks)."""

    def define_split(self, name: str, axis_or_extent: Any, num_outputs: int = 2, policy: str = "factors",
                     allow_tail: bool = False, *, max_factor: int | None = None,
                     candidates: Sequence | None = None, filter: Callable | None = None,
                     default: Sequence[int] | None = None) -> None:
        """A split of an axis into `num_outputs` axes; `default` gives all sizes (outermost may be
        -1) or only the inner ones."""
        extent = _extent(axis_or_extent, f"define_split {name!r}")
        entities = split_entities(extent, num_outputs, policy, allow_tail, max_factor, candidates, filter)
        if default is not None:
            d = tuple(int(v) for v in default)
            inner = d[1:] if len(d) == num_outputs else d
            default = [-(-extent // math.prod(inner))] + list(inner)
        self._define(name, "split", entities, default)

    def define_reorder(self, name: str, axes: Sequence[IterVar] | int, policy: str = "all", *,
                       candidates: Sequence[Sequence] | None = None, default: Sequence | None = None) -> None:
        """An order of `axes`: every permutation ("all") or the given ones ("candidates", as
        lists of the axes or of their positions)."""
        n = axes if isinstance(axes, int) else len(axes)
        listed: list = [] if isinstance(axes, int) else list(axes)
        position = (lambda a: a if isinstance(a, int) else listed.index(a))  # noqa: E731
        if policy == "all":
            if n > MAX_REORDER_AXES:
                raise ConfigError(f"define_reorder {name!r}: {n} axes have {math.factorial(n)} orders; "
                                  "give candidates instead")
            perms = list(itertools.permutations(range(n)))
        elif policy == "candidates":
            if not candidates:
                raise ConfigError(f"define_reorder {name!r}: policy 'candidates' needs candidates")
            perms = [tuple(position(a) for a in c) for c in candidates]
            for p in perms:
                if sorted(p) != list(range(n)):
                    raise ConfigError(f"define_reorder {name!r}: candidate {p} is not an order of {n} axes")
        else:
            raise ConfigError(f"define_reorder {name!r}: unknown policy {policy!r}; use one of "
                              f"{REORDER_POLICIES}")
        entities = list(dict.fromkeys(ReorderEntity(p) for p in perms))
        self._define(name, "reorder", entities,
                     None if default is None else [position(a) for a in default])

    def define_annotate(self, name: str, axes: Sequence[IterVar] | int, policy: str, *,
                        candidates: Sequence[Sequence[str]] | None = None,
                        default: Sequence[str] | None = None) -> None:
        """Annotations of `axes`: try_unroll (each axis unrolled or not), try_vec (the last axis
        vectorized or not), try_unroll_vec (both), try_parallel (the first axis parallel or
        not), or the given candidates."""
        n = axes if isinstance(axes, int) else len(axes)
        none: tuple[str, ...] = ("none",)
        choices: list[tuple[str, ...]] | None = None
        if policy == "try_unroll":
            choices = [none + ("unroll",)] * n
        elif policy == "try_vec":
            choices = [none] * (n - 1) + [none + ("vec",)]
        elif policy == "try_unroll_vec":
            choices = [none + ("unroll",)] * (n - 1) + [none + ("unroll", "vec")]
        elif policy == "try_parallel":
            choices = [none + ("parallel",)] + [none] * (n - 1)
        elif policy == "candidates":
            if not candidates:
                raise ConfigError(f"define_annotate {name!r}: policy 'candidates' needs candidates")
            combos = [tuple(c) for c in candidates]
        else:
            raise ConfigError(f"define_annotate {name!r}: unknown policy {policy!r}; use one of "
                              f"{ANNOTATE_POLICIES}")
        if choices is not None:
            # the product reads like a counter whose last axis moves fastest
            combos = list(itertools.product(*choices))
        for c in combos:
            if len(c) != n or any(a not in ANNOTATIONS for a in c):
                raise ConfigError(f"define_annotate {name!r}: {c} is not {n} of {ANNOTATIONS}")
        entities = list(dict.fromkeys(AnnotateEntity(c) for c in combos))
        self._define(name, "annotate", entities, default)

    def define_knob(self, name: str, values: Sequence, *, default: Any = None) -> None:
        """A plain choice among `values` (JSON scalars: bool, int, float, str, None)."""
        values = list(values)
        if not values:
            raise ConfigError(f"define_knob {name!r}: no values")
        for v in values:
            if not (v is None or isinstance(v, (bool, int, float, str))):
                raise ConfigError(f"define_knob {name!r}: value {v!r} is not a JSON scalar")
        if len({json.dumps(v) for v in values}) != len(values):
            raise ConfigError(f"define_knob {name!r}: values {values} repeat")
        self._define(name, "knob", [OtherOptionEntity(v) for v in values],
                     None if default is None else OtherOptionEntity(default).to_json())

    def _define(self, name: str, kind: str, entities: list, default: Any) -> None:  # pragma: no cover
        raise NotImplementedError


class ConfigSpace(_Defines):
    """The knobs a template declared (in declaration order).  Used as the template's `cfg`, it
    records knobs and answers each lookup with the knob's default ("collecting" mode), so a
    template called with a fresh ConfigSpace (or with None, see `as_config`) builds its default
    schedule."""

    is_fallback = True

    def __init__(self) -> None:
        self._knobs: dict[str, Knob] = {}

    # collecting mode --------------------------------------------------------------------------
    def _define(self, name: str, kind: str, entities: list, default: Any) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a knob needs a non-empty name, got {name!r}")
        if name in self._knobs:
            raise ConfigError(f"knob {name!r} is defined twice")
        knob = Knob(name, kind, tuple(entities))
        if default is not None:
            knob = replace(knob, default_index=knob.index_of(default))
        self._knobs[name] = knob

    def fallback_with(self, **values: Any) -> None:
        """Set the defaults of knobs already defined (each value must be one of the knob's)."""
        for name, value in values.items():
            knob = self.knob(name)
            self._knobs[name] = replace(knob, default_index=knob.index_of(value))

    def __getitem__(self, name: str):
        return self.knob(name).entities[self.knob(name).default_index]

    # the space --------------------------------------------------------------------------------
    def knob(self, name: str) -> Knob:
        try:
            return self._knobs[name]
        except KeyError:
            raise ConfigError(f"no knob {name!r} in this space (knobs: {', '.join(self._knobs) or 'none'}); "
                              "a template must define a knob before reading it") from None

    @property
    def knobs(self) -> dict[str, Knob]:
        return dict(self._knobs)

    def __contains__(self, name: str) -> bool:
        return name in self._knobs

    @property
    def size(self) -> int:
        """Number of points (a Python int; may exceed what `len()` can return)."""
        return math.prod(len(k) for k in self._knobs.values())

    def __len__(self) -> int:
        return self.size

    def get(self, index: int) -> "ConfigEntity":
        """The point with mixed-radix `index` (first knob least significant)."""
        if not 0 <= index < self.size:
            raise ConfigError(f"config index {index} is outside the space of {self.size} points")
        digits = []
        for knob in self._knobs.values():
            index, digit = divmod(index, len(knob))
            digits.append(digit)
        return ConfigEntity(self, tuple(digits))

    def default_config(self) -> "ConfigEntity":
        return ConfigEntity(self, tuple(k.default_index for k in self._knobs.values()))

    def from_json(self, values: dict) -> "ConfigEntity":
        """The point whose JSON form is `values` (exactly this space's knobs)."""
        if not isinstance(values, dict):
            raise ConfigError(f"a config is a dict of knob values, got {type(values).__name__}")
        missing = [n for n in self._knobs if n not in values]
        extra = [n for n in values if n not in self._knobs]
        if missing or extra:
            raise ConfigError(f"config does not fit this space: missing knobs {missing}, unknown knobs "
                              f"{extra} (was it recorded with another version of the template?)")
        return ConfigEntity(self, tuple(k.index_of(values[n]) for n, k in self._knobs.items()))

    def __iter__(self) -> Iterator["ConfigEntity"]:
        for index in range(self.size):
            yield self.get(index)

    def random(self, rng: Random) -> "ConfigEntity":
        return ConfigEntity(self, tuple(rng.randrange(len(k)) for k in self._knobs.values()))

    def neighbors(self, config: "ConfigEntity") -> list["ConfigEntity"]:
        """Every point that differs from `config` in exactly one knob."""
        out = []
        for pos, knob in enumerate(self._knobs.values()):
            for v in range(len(knob)):
                if v != config.indices[pos]:
                    out.append(config._with(pos, v))
        return out

    def mutate(self, config: "ConfigEntity", rng: Random) -> "ConfigEntity":
        """A random neighbour: one knob (with more than one value) set to another value; the
        config itself when no knob has a choice."""
        movable = [pos for pos, k in enumerate(self._knobs.values()) if len(k) > 1]
        if not movable:
            return config
        pos = rng.choice(movable)
        v = rng.randrange(len(list(self._knobs.values())[pos]) - 1)
        return config._with(pos, v if v < config.indices[pos] else v + 1)

    def __repr__(self) -> str:
        lines = [f"ConfigSpace ({self.size} points)"]
        lines += [f"  {k.describe()}" for k in self._knobs.values()]
        return "\n".join(lines)


class ConfigEntity(_Defines):
    """One point of a ConfigSpace.  Used as a template's `cfg`, each lookup answers this point's
    value; the template's define_* calls are checked against the space."""

    is_fallback = False

    def __init__(self, space: ConfigSpace, indices: tuple):
        if len(indices) != len(space.knobs):
            raise ConfigError(f"a config of this space has {len(space.knobs)} knob values, got {len(indices)}")
        for knob, i in zip(space.knobs.values(), indices):
            if not 0 <= i < len(knob):
                raise ConfigError(f"knob {knob.name!r}: value index {i} is outside 0..{len(knob) - 1}")
        self.space = space
        self.indices = tuple(indices)

    def _with(self, pos: int, value: int) -> "ConfigEntity":
        return ConfigEntity(self.space, self.indices[:pos] + (value,) + self.indices[pos + 1:])

    def _define(self, name: str, kind: str, entities: list, default: Any) -> None:
        knob = self.space.knob(name)
        if knob.kind != kind or len(knob) != len(entities):
            raise ConfigError(f"knob {name!r} is defined as a {kind} with {len(entities)} values, but this "
                              f"config's space has a {knob.kind} with {len(knob)} values")

    def fallback_with(self, **values: Any) -> None:
        """Only a collecting space has defaults to set; a config keeps its values."""

    @property
    def index(self) -> int:
        index, stride = 0, 1
        for knob, i in zip(self.space.knobs.values(), self.indices):
            index += i * stride
            stride *= len(knob)
        return index

    def __getitem__(self, name: str):
        knob = self.space.knob(name)
        return knob.entities[self.indices[list(self.space.knobs).index(name)]]

    def to_json(self) -> dict:
        """{knob name: JSON value}, in declaration order."""
        return {name: knob.entities[i].to_json()
                for (name, knob), i in zip(self.space.knobs.items(), self.indices)}

    @property
    def key(self) -> str:
        """Canonical JSON text of the config (sorted keys): equal configs, equal keys."""
        return config_key(self.to_json())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigEntity) and self.space is other.space and self.indices == other.indices

    def __hash__(self) -> int:
        return hash(self.indices)

    def __repr__(self) -> str:
        return f"ConfigEntity(index={self.index}, {json.dumps(self.to_json())})"

    def __str__(self) -> str:
        """What reports and progress lines show: `config 17 (tile_m=[1, 2], order=[1, 0])`."""
        return f"config {self.index} ({format_config(self.to_json())})"


def format_config(values: dict) -> str:
    """A config's knob values for people: `tile_m=[1, 2], order=[1, 0]` (JSON values)."""
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in values.items()) or "no knobs"


def config_key(values: dict) -> str:
    """Canonical JSON text of a config dict (the record files' identity of a config)."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def as_config(cfg: ConfigSpace | ConfigEntity | None) -> ConfigSpace | ConfigEntity:
    """What a template uses when called without a config: a fresh collecting space, whose
    lookups give the defaults."""
    return ConfigSpace() if cfg is None else cfg
