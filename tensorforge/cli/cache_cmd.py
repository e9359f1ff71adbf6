"""`tensorforge cache`: what the cache directory holds, and pruning it (runtime/cache_admin.py).

    tensorforge cache [info]                          sizes by kind, location, oldest use
    tensorforge cache prune --max-size 2G [--older-than 30d] [--dry-run]
    tensorforge cache clear [--calibration] [--dry-run]
"""
from __future__ import annotations

import time

from ..errors import UsageError


def cache_command(opts) -> int:
    from tensorforge.runtime import cache_admin as ca
    from tensorforge.runtime.cache_files import cache_dir

    root = cache_dir()
    entries = ca.scan(root)
    action = opts.action or "info"
    if action == "info":
        _print_summary(entries, f"cache: {root}")
        if entries:
            oldest = min(e.used for e in entries)
            print(f"least recently used entry: {_age(time.time() - oldest)} ago")
        return 0
    if action == "prune":
        if opts.max_size is None and opts.older_than is None:
            raise UsageError("cache prune needs --max-size SIZE and/or --older-than AGE (e.g. --max-size 2G)")
        try:
            max_bytes = ca.parse_size(opts.max_size) if opts.max_size is not None else None
            older = ca.parse_age(opts.older_than) if opts.older_than is not None else None
        except ValueError as err:
            raise UsageError(str(err)) from None
        gone = ca.prune(entries, max_bytes, older, dry_run=opts.dry_run)
    else:
        gone = ca.clear(entries, calibration=opts.calibration, dry_run=opts.dry_run)
    verb = "would remove" if opts.dry_run else "removed"
    _print_summary(gone, f"{verb} from {root}:")
    if not gone:
        print("  nothing")
    removed = {id(e) for e in gone}
    kept = [e for e in entries if id(e) not in removed]
    print(f"left: {ca.human(sum(e.size for e in kept))} in {sum(len(e.paths) for e in kept)} files")
    return 0


def _print_summary(entries, title: str) -> None:
    from tensorforge.runtime import cache_admin as ca

    print(title)
    for kind, (count, size) in ca.summary(entries).items():
        print(f"  {kind:14s} {count:8d} {'entry' if count == 1 else 'entries':7s} {ca.human(size):>10s}")
    if entries:
        print(f"  {'total':14s} {len(entries):8d} {'':7s} {ca.human(sum(e.size for e in entries)):>10s}")


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def add_cache_command(sub) -> None:
    p = sub.add_parser("cache", help="what the kernel cache holds; prune or clear it",
                       description="Show, prune or clear the cache directory ($TENSORFORGE_CACHE_DIR, "
                                   "default ~/.cache/tensorforge). Compiles never delete anything from it.")
    p.add_argument("action", nargs="?", choices=("info", "prune", "clear"), help="default: info")
    p.add_argument("--max-size", help="prune: remove the least recently used entries until the rest fit (e.g. 2G)")
    p.add_argument("--older-than", help="prune: remove entries unused for this long (e.g. 30d, 12h)")
    p.add_argument("--calibration", action="store_true", help="clear: also forget this CPU's calibration")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    p.set_defaults(fn=cache_command)
