"""The paper's accelerator figures on the simulated accelerator (its Figure 10, and the
accelerator side of Figure 21), for ResNet-18's layers in the paper's numbering (C2-C12).

For each layer: the compiled conv2d with its requantizing epilogue (conv2d_module) at 1 and 2
virtual threads, run on the simulator with random int8 data and checked bit for bit against
NumPy; the table gives ops per DRAM byte (2 x MACs / bytes moved by all DMAs), the GEMM core's
utilization (useful GEMM cycles / makespan) and the cycles.  Then the accelerator's time for the
19 convolutions ResNet-18 offloads (each layer times its count in the network) at the
configuration's clock.  The cycle model's parameters are printed with the numbers.

    python benchmarks/accel.py                 # the 3x3 layers (Figure 10)
    python benchmarks/accel.py --all           # the 1x1 layers too
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tensorforge.backends.accel import AccelConfig, conv2d_module  # noqa: E402

# paper name: (H, IC, OC, K, S, times in ResNet-18)
LAYERS = {
    "C2": (56, 64, 64, 3, 1, 4), "C3": (56, 64, 64, 1, 1, 0), "C4": (56, 64, 128, 3, 2, 1),
    "C5": (56, 64, 128, 1, 2, 1), "C6": (28, 128, 128, 3, 1, 3), "C7": (28, 128, 256, 3, 2, 1),
    "C8": (28, 128, 256, 1, 2, 1), "C9": (14, 256, 256, 3, 1, 3), "C10": (14, 256, 512, 3, 2, 1),
    "C11": (14, 256, 512, 1, 2, 1), "C12": (7, 512, 512, 3, 1, 3),
}
SHIFT = 8


def reference(data, weight, bias, stride, pad):
    n, c, h, w = data.shape
    o, _, kh, kw = weight.shape
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    x = np.pad(data.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    acc = np.zeros((n, o, oh, ow), np.int64)
    for dy in range(kh):
        for dx in range(kw):
            acc += np.einsum("nchw,oc->nohw", x[:, :, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride],
                             weight[:, :, dy, dx].astype(np.int64))
    return np.clip((acc.astype(np.int32) >> SHIFT) + bias[None, :, None, None], 0, 127).astype(np.int8)


def run(name: str, threads: int, config: AccelConfig):
    h, ic, oc, k, s, _ = LAYERS[name]
    rng = np.random.default_rng(0)
    data = rng.integers(-128, 128, (1, ic, h, h), dtype=np.int8)
    weight = rng.integers(-128, 128, (oc, ic, k, k), dtype=np.int8)
    bias = rng.integers(-300, 300, (oc,), dtype=np.int32)
    module = conv2d_module(data.shape, weight.shape, s, k // 2, SHIFT, virtual_threads=threads, config=config)
    oh = (h + 2 * (k // 2) - k) // s + 1
    out = np.zeros((1, oc, oh, oh), np.int8)
    stats = module(data, weight, bias, out)
    if not np.array_equal(out, reference(data, weight, bias, s, k // 2)):
        raise SystemExit(f"{name} with {threads} virtual thread(s): wrong result")
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="also the 1x1 layers")
    args = ap.parse_args()
    config = AccelConfig()
    names = [n for n in LAYERS if args.all or LAYERS[n][3] == 3]
    print(f"accelerator {config.name}: {config.macs_per_cycle} MAC/cycle at {config.clock_mhz:g} MHz; "
          f"DMA {config.dma_latency} cycles + {config.dma_bytes_per_cycle} B/cycle; ALU {config.alu_ii} "
          "cycles/vector")
    print(f"{'layer':6} {'ops/byte':>9} {'util 1 vt':>10} {'util 2 vt':>10} {'cycles 1 vt':>12} "
          f"{'cycles 2 vt':>12} {'speedup':>8}")
    per_layer = {}
    t0 = time.perf_counter()
    for name in names:
        one, two = run(name, 1, config), run(name, 2, config)
        moved = sum(two.dma_bytes.values())
        ops_per_byte = 2 * two.macs / moved
        print(f"{name:6} {ops_per_byte:9.1f} {one.utilization:10.3f} {two.utilization:10.3f} {one.cycles:12d} "
              f"{two.cycles:12d} {one.cycles / two.cycles:8.2f}", flush=True)
        per_layer[name] = two
    offloaded = [n for n in LAYERS if LAYERS[n][5] and n in per_layer]
    if len(offloaded) == sum(1 for n in LAYERS if LAYERS[n][5]):
        kernels = sum(LAYERS[n][5] for n in offloaded)
        blocks = sum(LAYERS[n][5] * per_layer[n].gemm_blocks for n in offloaded)
        seconds = sum(LAYERS[n][5] * per_layer[n].seconds for n in offloaded)
        print(f"\nResNet-18 on the accelerator (2 virtual threads): {kernels} convolutions, {blocks:,} GEMM "
              f"blocks, {seconds * 1e3:.1f} ms at {config.clock_mhz:g} MHz")
    print(f"(simulated in {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
