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
  bert_base, t5_small_enc (relative position bias), gpt2_6l (6 layers, tanh GELU with Pow,
                causal mask; dynamo exporter, weights in NAME.onnx.data): 128, 64, 64 tokens
  vit_base, deit_small, swin_tiny (shifted windows), levit, mobilevit_s, segformer_b0 (Mix-FFN:
                depthwise convs between token layouts): images of 224x224 (256x256 for the last two)
  convnext_tiny, regnet, efficientnet_b0 (squeeze-and-excitation, swish), mobilenet_v2_hf
                (TensorFlow-style padding: a Pad before each strided conv), poolformer
  wav2vec2_base a wav2vec 2.0 encoder with 4 layers over one second of 16 kHz audio (strided conv1d
                stack, grouped positional conv)

Weights: convolutions and linear layers get PyTorch's default initialization (Hugging Face's
N(0, 0.02) makes the activations of deep convnets vanish, so that a wrong answer would hide under
the tolerance), batch norms non-trivial statistics.  Each export is run by ONNX Runtime and
checked against eager PyTorch before it is kept (rtol 1e-3, atol 1e-4 of the output's scale).
The file's metadata names the architecture, so that `e2e.py --onnx` times the very module that
was exported as the PyTorch peer (`get(name)` rebuilds it, with the same weights).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "exports"))   # models.py

NAMES = ("vit_small", "distilbert", "convnext", "resnet50", "whisper_enc", "bert_base", "t5_small_enc", "gpt2_6l",
         "vit_base", "deit_small", "swin_tiny", "levit", "mobilevit_s", "segformer_b0", "convnext_tiny", "regnet",
         "efficientnet_b0", "mobilenet_v2_hf", "poolformer", "wav2vec2_base",
         # stop 32's second set: decoder LLMs, more encoders, vision and audio kinds
         "llama_4l", "qwen2_4l", "opt_4l", "bloom_4l", "deberta_v2", "albert", "mobilebert", "roberta",
         "dinov2_small", "beit", "convnextv2", "cvt", "focalnet", "yolos", "swinv2", "hubert", "ast", "encodec")
DYNAMO = ("gpt2_6l", "llama_4l", "qwen2_4l")   # the TorchScript exporter cannot export a causal mask (aten::diff)


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
    image = (torch.rand(1, 3, 256, 256) if name in ("mobilevit_s", "segformer_b0") else torch.rand(1, 3, 224, 224),)
    text = {"bert_base": 128, "t5_small_enc": 64, "gpt2_6l": 64}
    if name in text:
        model = {"bert_base": lambda: tr.BertModel(tr.BertConfig(), add_pooling_layer=False),
                 "t5_small_enc": lambda: tr.T5EncoderModel(tr.T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8)),
                 "gpt2_6l": lambda: tr.GPT2Model(tr.GPT2Config(n_layer=6, use_cache=False))}[name]()
        return model, (torch.randint(0, 1000, (1, text[name])),), ["input_ids"]
    vision = {
        "vit_base": lambda: tr.ViTModel(tr.ViTConfig(), add_pooling_layer=False),
        "deit_small": lambda: tr.ViTModel(tr.ViTConfig(hidden_size=384, num_attention_heads=6, intermediate_size=1536),
                                          add_pooling_layer=False),
        "swin_tiny": lambda: tr.SwinModel(tr.SwinConfig()),
        "levit": lambda: tr.LevitModel(tr.LevitConfig()),
        "mobilevit_s": lambda: tr.MobileViTModel(tr.MobileViTConfig()),
        "segformer_b0": lambda: tr.SegformerModel(tr.SegformerConfig()),
        "convnext_tiny": lambda: tr.ConvNextModel(tr.ConvNextConfig()),
        "regnet": lambda: tr.RegNetModel(tr.RegNetConfig()),
        "efficientnet_b0": lambda: tr.EfficientNetModel(tr.EfficientNetConfig(
            width_coefficient=1.0, depth_coefficient=1.0, image_size=224, hidden_dim=1280)),
        "mobilenet_v2_hf": lambda: tr.MobileNetV2Model(tr.MobileNetV2Config()),
        "poolformer": lambda: tr.PoolFormerModel(tr.PoolFormerConfig()),
    }
    if name in vision:
        return vision[name](), image, ["pixel_values"]
    if name == "wav2vec2_base":
        return tr.Wav2Vec2Model(tr.Wav2Vec2Config(num_hidden_layers=4)), (torch.randn(1, 16000),), ["input_values"]
    more = _more(name, torch, tr)
    if more is not None:
        return more
    raise ValueError(f"unknown architecture {name!r}; known: {', '.join(NAMES)}")


def _more(name: str, torch, tr):
    """The second set: llama_4l and qwen2_4l (width 512, 8 heads sharing 2 key/value heads, RMSNorm,
    rotary embeddings, SiLU-gated MLP), opt_4l, bloom_4l (ALiBi), deberta_v2 (disentangled
    attention), albert (one layer's weights run 12 times), mobilebert, roberta (4 layers), 128
    tokens each; dinov2_small, beit, convnextv2, cvt, focalnet, swinv2 (256x256), yolos (320x320);
    hubert (4 layers, one second of 16 kHz audio), ast (audio spectrogram transformer, 4 layers),
    encodec (the 24 kHz codec's conv encoder with its LSTM over one second)."""
    ids = (torch.randint(0, 1000, (1, 128)),)
    decoders = {"llama_4l": (tr.LlamaConfig, tr.LlamaModel), "qwen2_4l": (tr.Qwen2Config, tr.Qwen2Model)}
    if name in decoders:
        config, model = decoders[name]
        cfg = config(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                     num_key_value_heads=2, vocab_size=32000, use_cache=False)
        return model(cfg), ids, ["input_ids"]
    text = {
        "opt_4l": lambda: tr.OPTModel(tr.OPTConfig(hidden_size=512, ffn_dim=2048, num_hidden_layers=4,
                                                   num_attention_heads=8, word_embed_proj_dim=512, use_cache=False)),
        "bloom_4l": lambda: tr.BloomModel(tr.BloomConfig(hidden_size=512, n_layer=4, n_head=8, use_cache=False)),
        "deberta_v2": lambda: tr.DebertaV2Model(tr.DebertaV2Config(hidden_size=384, num_hidden_layers=4,
                                                                   num_attention_heads=6, intermediate_size=1536)),
        "albert": lambda: tr.AlbertModel(tr.AlbertConfig(hidden_size=768, num_attention_heads=12,
                                                         intermediate_size=3072), add_pooling_layer=False),
        "mobilebert": lambda: tr.MobileBertModel(tr.MobileBertConfig(num_hidden_layers=8), add_pooling_layer=False),
        "roberta": lambda: tr.RobertaModel(tr.RobertaConfig(num_hidden_layers=4), add_pooling_layer=False),
    }
    if name in text:
        return text[name](), ids, ["input_ids"]
    vision = {
        "dinov2_small": lambda: tr.Dinov2Model(tr.Dinov2Config(hidden_size=384, num_hidden_layers=6, num_attention_heads=6)),
        "beit": lambda: tr.BeitModel(tr.BeitConfig(num_hidden_layers=4, use_relative_position_bias=True),
                                     add_pooling_layer=False),
        "convnextv2": lambda: tr.ConvNextV2Model(tr.ConvNextV2Config()),
        "cvt": lambda: tr.CvtModel(tr.CvtConfig(), add_pooling_layer=False),
        "focalnet": lambda: tr.FocalNetModel(tr.FocalNetConfig()),
    }
    if name in vision:
        return vision[name](), (torch.rand(1, 3, 224, 224),), ["pixel_values"]
    if name == "swinv2":
        return tr.Swinv2Model(tr.Swinv2Config()), (torch.rand(1, 3, 256, 256),), ["pixel_values"]
    if name == "yolos":
        cfg = tr.YolosConfig(num_hidden_layers=4, image_size=[320, 320], hidden_size=384, num_attention_heads=6,
                             intermediate_size=1536)
        return tr.YolosModel(cfg, add_pooling_layer=False), (torch.rand(1, 3, 320, 320),), ["pixel_values"]
    if name == "hubert":
        return tr.HubertModel(tr.HubertConfig(num_hidden_layers=4)), (torch.randn(1, 16000),), ["input_values"]
    if name == "ast":
        return tr.ASTModel(tr.ASTConfig(num_hidden_layers=4)), (torch.randn(1, 1024, 128),), ["input_values"]
    if name == "encodec":

        class Encoder(torch.nn.Module):
            def __init__(self, codec):
                super().__init__()
                self.codec = codec

            def forward(self, x):
                return (self.codec.encoder(x),)

        return Encoder(tr.EncodecModel(tr.EncodecConfig())), (torch.randn(1, 1, 24000),), ["input_values"]
    return None


WORKLOAD_PREFIX = "architectures:"   # the metadata's workload name: e2e.py times this very module


def get(name: str) -> tuple:
    """(module in eval mode returning the model's first output, its example inputs, their
    names): the module that `export` writes, with the same weights on every call."""
    import torch

    module, args, names = build(name)
    _plain_weights(module)

    class FirstOutput(torch.nn.Module):
        """The model's first output (the last hidden state) as a plain tensor."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *xs):
            return self.inner(*xs)[0]

    return FirstOutput(module.eval()).eval(), args, names


def export(name: str, out: Path) -> None:
    import onnx
    import onnxruntime as ort
    import torch
    from export import name_workload

    wrapped, args, names = get(name)
    feeds = {n: a.numpy() for n, a in zip(names, args)}
    path = out / f"{name}.onnx"
    for stale in (path, out / f"{name}.onnx.data"):
        stale.unlink(missing_ok=True)
    with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        expected = wrapped(*args).numpy()
        dynamo = name in DYNAMO
        torch.onnx.export(wrapped, args, str(path), input_names=names, output_names=["y"], dynamo=dynamo,
                          **({} if dynamo else {"opset_version": 17}))
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4 * (float(np.abs(expected).max()) or 1.0),
                               err_msg=f"{name}: the export run by ONNX Runtime differs from eager PyTorch")
    proto = onnx.load(str(path))
    name_workload(proto, WORKLOAD_PREFIX + name, 0)
    # the dynamo exporter's file keeps its weights beside it, under one name
    (out / f"{name}.onnx.data").unlink(missing_ok=True)
    onnx.save(proto, str(path), **({"save_as_external_data": True, "location": f"{name}.onnx.data"} if dynamo else {}))
    np.savez(out / f"{name}.npz", **feeds)


def _plain_weights(module) -> None:
    """PyTorch's default initialization for convolutions and linear layers, and batch norms with
    statistics away from the identity (seeded, as benchmarks/exports/models.py does)."""
    import torch
    from models import randomize_batch_norms

    for m in module.modules():
        if isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Linear)):
            m.reset_parameters()
    randomize_batch_norms(module, torch.Generator().manual_seed(1))


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
    from export import export_each, select_names

    names = select_names(args.only, NAMES, "architecture")
    if names is None:
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return export_each(names, out, lambda name: export(name, out))

if __name__ == "__main__":
    sys.exit(main())
