"""Loop programs as JSON: PrimFunc -> text -> PrimFunc, for the on-disk lowering cache.

The cache must never run code it reads (pickle would: a file planted in the cache directory
would execute during `compile`), so lowered kernels are stored as data.  Every IR node is a
frozen dataclass; a program is written as a table of nodes, each written once, with fields that
refer to other nodes by their position in the table.  Writing each node once keeps the
program's sharing: variables and buffers are compared by identity, and a loaded program uses
one object wherever the lowered one did.

Reading looks class names up in `NODE_CLASSES`, the node classes of `ir/expr.py` and
`tir/nodes.py` (and tir/kernel.py's launch records) and nothing else: an unknown name is
rejected with ValueError, never imported.
Fields hold only nodes, tuples, lists, str-keyed dicts, str, int, float, bool and None.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from ..ir import expr as E
from ..ir.functor import field_names
from . import kernel as K
from . import nodes as N

FORMAT = "tensorforge-ir"
VERSION = 1


def _node_classes() -> dict[str, type]:
    classes = {}
    for module in (E, N, K):     # K: a GPU kernel's launch record (KernelInfo) sits in its IR
        for name, obj in vars(module).items():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__:
                classes[name] = obj
    return classes


NODE_CLASSES: dict[str, type] = _node_classes()


def dumps(root: Any) -> str:
    """The JSON text of `root` (a PrimFunc or any IR node); TypeError for a value that is
    not IR data (an object of another class, a dict with non-string keys)."""
    table: list = []
    index: dict[int, int] = {}        # id(node) -> position in table

    def enc(x: Any) -> Any:
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return x if -(2 ** 53) < x < 2 ** 53 else {"i": str(x)}
        if isinstance(x, float):
            return x if math.isfinite(x) else {"f": repr(x)}
        if isinstance(x, tuple):
            return {"t": [enc(v) for v in x]}
        if isinstance(x, list):
            return [enc(v) for v in x]
        if isinstance(x, dict):
            if not all(isinstance(k, str) for k in x):
                raise TypeError("only dicts with string keys can be written")
            return {"d": {k: enc(v) for k, v in x.items()}}
        cls = type(x)
        if NODE_CLASSES.get(cls.__name__) is not cls:
            raise TypeError(f"{cls.__name__} is not an IR node class; it cannot be written")
        pos = index.get(id(x))
        if pos is None:
            fields = {name: enc(getattr(x, name)) for name in field_names(cls)}
            pos = index[id(x)] = len(table)
            table.append([cls.__name__, fields])
        return {"n": pos}

    root_ref = enc(root)
    return json.dumps({"format": FORMAT, "version": VERSION, "nodes": table, "root": root_ref},
                      separators=(",", ":"), allow_nan=False)


def loads(text: str | bytes) -> Any:
    """The IR value written by `dumps`; ValueError when the text is not such a value."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"not JSON: {err}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ValueError(f"not a {FORMAT} v{VERSION} document")
    table = doc.get("nodes")
    if not isinstance(table, list):
        raise ValueError("no node table")
    built: list = [None] * len(table)

    def dec(x: Any, limit: int) -> Any:
        if x is None or isinstance(x, (bool, str, int, float)):
            return x
        if isinstance(x, list):
            return [dec(v, limit) for v in x]
        if not isinstance(x, dict) or len(x) != 1:
            raise ValueError(f"malformed value {str(x)[:60]}")
        (tag, v), = x.items()
        if tag == "n":
            # a node refers only to nodes written before it: the table has no cycles
            if not isinstance(v, int) or not 0 <= v < limit or built[v] is None:
                raise ValueError(f"bad node reference {v!r}")
            return built[v]
        if tag == "t" and isinstance(v, list):
            return tuple(dec(e, limit) for e in v)
        if tag == "d" and isinstance(v, dict):
            return {k: dec(e, limit) for k, e in v.items()}
        if tag == "i" and isinstance(v, str):
            return int(v)
        if tag == "f" and v in ("inf", "-inf", "nan"):
            return float(v)
        raise ValueError(f"malformed value {str(x)[:60]}")

    for pos, entry in enumerate(table):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], dict)):
            raise ValueError(f"malformed node {pos}")
        name, fields = entry
        cls = NODE_CLASSES.get(name)
        if cls is None:
            raise ValueError(f"unknown node class {name!r}")
        names = field_names(cls)
        if len(fields) != len(names) or any(f not in fields for f in names):
            raise ValueError(f"node {pos} ({name}) has fields {sorted(fields)}, expected {sorted(names)}")
        node: Any = object.__new__(cls)     # no __init__/__post_init__: the fields as written
        for f in names:
            object.__setattr__(node, f, dec(fields[f], pos))
        built[pos] = node
    return dec(doc.get("root"), len(table))
