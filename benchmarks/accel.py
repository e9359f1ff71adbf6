"""The paper's accelerator figures on the simulated accelerator (its Figure 10, and the
accelerator side of Figure 21), for ResNet-18's layers in the paper's numbering (C2-C12).

For each layer: the compiled conv2d with its requantizing epilogue (conv2d_module) at 1 and 2
virtual threads, run on the simulator with random int8 data and checked bit for bit against
NumPy; the table gives ops per DRAM byte (2 x MACs / bytes moved by all DMAs), the GEMM core's
utilization (useful GEMM cycles / makespan) and the cycles.  Then the accelerator's time for the
19 convolutions ResNet-18 offloads (each layer times its count in the network) at the
configuration's clock.  The cycle model's parameters are printed with the numbers.

Figure 21: the whole int8 ResNet-18 (testing/resnet_int8.py) compiled with target "accel" and
checked bit for bit against the same graph compiled for the CPU; the time split between the
CPU (wall time of its C kernels on this machine: the first conv, pooling, residual adds, the
classifier) and the accelerator (simulated time of its 19 convolutions at the configured clock),
next to the CPU-only run's time of the same kernels.

    python benchmarks/accel.py                 # the 3x3 layers (Figure 10) and the split (Figure 21)
    python benchmarks/accel.py --all           # the 1x1 layers too
    python benchmarks/accel.py --no-network    # Figure 10 only
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
    ap.add_argument("--no-network", action="store_true", help="skip the whole-network split (Figure 21)")
    ap.add_argument("--repeat", type=int, default=3, help="CPU timing runs for the split (the median is kept)")
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
    if not args.no_network:
        network_split(args.repeat)


def _step_seconds(model, data: np.ndarray, repeat: int) -> list[float]:
    """Median wall seconds of each step of `model` over `repeat` runs."""
    runs = []
    for _ in range(max(1, repeat)):
        timings = [0.0] * len(model.spec.steps)
        model.executor.run_with({model.input_names[0]: data}, timings=timings)
        runs.append(timings)
    return [float(np.median([r[k] for r in runs])) for k in range(len(model.spec.steps))]


def _kind(ops: list[str]) -> str:
    """What a CPU kernel of the int8 ResNet-18 is, from the ops it fuses."""
    if "conv2d_int8" in ops:
        return "conv (C1)"
    if "add" in ops:
        return "residual adds"
    if "max_pool2d" in ops:
        return "max pool"
    return "classifier (avg pool, dense)"


def network_split(repeat: int) -> None:
    """Figure 21: ResNet-18's time on the CPU and on the accelerator."""
    import tensorforge as tf
    from tensorforge.testing.resnet_int8 import resnet18_int8

    graph, inputs = resnet18_int8()
    data = inputs["data"]
    cpu_model = tf.compile(graph, target="c")
    model = tf.compile(graph, target="accel")
    if not np.array_equal(model(data)[0], cpu_model(data)[0]):
        raise SystemExit("ResNet-18 with offload differs from the CPU-only run")
    placement = model.info["placement"]
    cpu_only = _step_seconds(cpu_model, data, repeat)
    mixed = _step_seconds(model, data, repeat)
    stats = model.accel_stats()
    accel_s = sum(s.seconds for s in stats.values() if s is not None)
    cpu_s = sum(t for k, t in enumerate(mixed) if k not in stats)
    offloaded_on_cpu = sum(cpu_only[k] for k in stats)
    kinds: dict[str, float] = {}
    for k, (label, _device) in enumerate(placement):
        if k not in stats:
            kind = _kind(label.split(":", 1)[1].split("+"))
            kinds[kind] = kinds.get(kind, 0.0) + mixed[k]
    total = cpu_s + accel_s
    print(f"\nResNet-18 int8, whole network (Figure 21): {len(stats)} kernels on the accelerator, "
          f"{len(placement) - len(stats)} on the CPU; bit-exact with the CPU-only run")
    print(f"{'where':28} {'ms':>9} {'share':>7}")
    print(f"{'accelerator (simulated)':28} {accel_s * 1e3:9.2f} {accel_s / total:7.1%}")
    print(f"{'CPU (measured)':28} {cpu_s * 1e3:9.2f} {cpu_s / total:7.1%}")
    for kind, t in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"{'  ' + kind:28} {t * 1e3:9.2f}")
    print(f"{'total with offload':28} {total * 1e3:9.2f}")
    print(f"{'CPU only (same kernels)':28} {sum(cpu_only) * 1e3:9.2f}   "
          f"(the offloaded convs: {offloaded_on_cpu * 1e3:.2f} ms on the CPU)")


if __name__ == "__main__":
    main()
