"""Other architectures as users export them: models built from `transformers` configurations
(seeded random weights, no download) and exported with `torch.onnx.export`, as NAME.onnx +
NAME.npz (the folder layout `e2e.py --onnx` reads).  The real-model benchmarks cover one model
of each kind; these are the kinds' other members, at the sizes people run.

    pip install transformers                      # besides the [torch] extra
    python benchmarks/architectures.py DIR [--only vit_small,distilbert]
    python benchmarks/e2e.py --onnx DIR --threads 1,2

  vit_small     ViT with 6 layers of width 384 on 224x224 (197 tokens: attention over an odd count)
  distilbert    DistilBERT with 4 layers, 100 tokens and an attention mask
  convnext      ConvNeXt with stages of 48-384 channels (7x7 depthwise convs, LayerNorm) on 224x224
  resnet50      ResNet-50 (bottleneck blocks) on 224x224
  whisper_enc   a Whisper encoder with 4 layers of width 384 over 3000 frames (conv1d stem, 1500 tokens)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

NAMES = ("vit_small", "distilbert", "convnext", "resnet50", "whisper_enc")


def build(name: str):
    """(module, example inputs, input names) of one architecture, weights from seed 0."""
    import torch
    import transformers as tr
    torch.manual_seed(0)
    if name == "vit_small":
        cfg = tr.ViTConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536,
                           image_size=224, patch_size=16)
        return tr.ViTModel(cfg), (torch.randn(1, 3, 224, 224),), ["pixel_values"]
    if name == "distilbert":
        ids = torch.randint(0, 30000, (1, 100))
        return tr.DistilBertModel(tr.DistilBertConfig(n_layers=4)), (ids, torch.ones(1, 100, dtype=torch.long)), \
            ["input_ids", "attention_mask"]
    if name == "convnext":
        cfg = tr.ConvNextConfig(depths=[2, 2, 4, 2], hidden_sizes=[48, 96, 192, 384])
        return tr.ConvNextModel(cfg), (torch.randn(1, 3, 224, 224),), ["pixel_values"]
    if name == "resnet50":
        cfg = tr.ResNetConfig(depths=[3, 4, 6, 3], layer_type="bottleneck")
        return tr.ResNetModel(cfg), (torch.randn(1, 3, 224, 224),), ["pixel_values"]
    if name == "whisper_enc":
        cfg = tr.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, decoder_layers=1,
                               encoder_ffn_dim=1536, max_source_positions=1500)
        return tr.WhisperModel(cfg).get_encoder(), (torch.randn(1, 80, 3000),), ["input_features"]
    raise ValueError(f"unknown architecture {name!r}; known: {', '.join(NAMES)}")


def export(name: str, out: Path) -> None:
    import torch

    module, args, names = build(name)

    class FirstOutput(torch.nn.Module):
        """The model's first output (the last hidden state) as a plain tensor."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *xs):
            return self.inner(*xs)[0]

    wrapped = FirstOutput(module.eval()).eval()
    with torch.no_grad():
        torch.onnx.export(wrapped, args, str(out / f"{name}.onnx"), input_names=names, output_names=["y"],
                          opset_version=17, dynamo=False)
    np.savez(out / f"{name}.npz", **{n: a.numpy() for n, a in zip(names, args)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the folder to write NAME.onnx and NAME.npz into")
    ap.add_argument("--only", help="comma-separated names (default: all)")
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as err:
        print(f"architectures.py needs torch and transformers ({err.name} is missing): "
              "pip install transformers, and the [torch] extra", file=sys.stderr)
        return 1
    names = args.only.split(",") if args.only else list(NAMES)
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        print(f"unknown architecture(s) {', '.join(unknown)}; known: {', '.join(NAMES)}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        export(name, out)
        print(f"{name}: {out / (name + '.onnx')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
