"""The TVM paper's six workloads as a PyTorch user writes them: torch.nn modules (Conv2d,
BatchNorm2d, ConvTranspose2d, Linear, LayerNorm, LSTM, Embedding), eval mode, seeded random
weights.  benchmarks/exports/export.py turns each into NAME.onnx with torch.onnx.export, so the
benchmarks measure the graphs users' exporters produce, not the ones tensorforge's own model zoo
(tensorforge/testing/models*.py) builds node by node.

    module, feeds = get("resnet18", seed=0)       # module in eval mode, {input name: np.ndarray}
    outputs = module(*[torch.from_numpy(feeds[n]) for n in input_names("resnet18")])

Topologies: torchvision's ResNet-18 written out by hand (torchvision is not needed), MobileNet v1
(width 1.0, table 1 of the paper), the Nature DQN on 4 stacked 84x84 frames, the DCGAN generator
(latent 100 -> 3x64x64), a small BERT (token and position embeddings, 4 post-LayerNorm encoder
layers of width 256 with 4 heads, FFN 1024 with GELU, sequence 128) and the medium word-level
LSTM language model (embedding, 2-layer nn.LSTM of 650, 35 steps, Linear 650 -> 10000).  The
names are those of the zoo, so the tables of both line up.

Weights: PyTorch's own initialization under torch.manual_seed(seed); batch norms then get
non-trivial running statistics and affine parameters (seeded too), so that every layer's output
is numerically meaningful and a wrong fold of a batch norm would show.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

try:
    import torch
    from torch import nn
except ImportError as exc:  # pragma: no cover - the benchmarks report torch as n/a
    raise ImportError("benchmarks/exports needs PyTorch: pip install 'tensorforge[torch]'") from exc


# -- ResNet-18 (torchvision's layout) -------------------------------------------------------------
class BasicBlock(nn.Module):
    """conv3x3-bn-relu-conv3x3-bn plus the (1x1-conv-bn projected) shortcut, then relu."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, cin = [], 64
        for k, cout in enumerate((64, 128, 256, 512)):
            stride = 1 if k == 0 else 2
            stages.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# -- MobileNet v1 ---------------------------------------------------------------------------------
# (output channels, stride) of the 13 depthwise-separable blocks, table 1 of the paper
MOBILENET_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                    (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))


def _conv_bn_relu(cin: int, cout: int, k: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class MobileNetV1(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers, cin = [_conv_bn_relu(3, 32, 3, 2)], 32
        for cout, stride in MOBILENET_BLOCKS:
            layers += [_conv_bn_relu(cin, cin, 3, stride, groups=cin), _conv_bn_relu(cin, cout, 1, 1)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


# -- Nature DQN -----------------------------------------------------------------------------------
class DQN(nn.Module):
    def __init__(self, actions: int = 18):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten(),
            nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, actions))

    def forward(self, x):
        return self.net(x)


# -- DCGAN generator ------------------------------------------------------------------------------
class DCGANGenerator(nn.Module):
    def __init__(self, latent: int = 100, width: int = 64):
        super().__init__()
        w = width
        self.main = nn.Sequential(
            nn.ConvTranspose2d(latent, w * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(w * 8), nn.ReLU(True),
            nn.ConvTranspose2d(w * 8, w * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(w * 4), nn.ReLU(True),
            nn.ConvTranspose2d(w * 4, w * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(w * 2), nn.ReLU(True),
            nn.ConvTranspose2d(w * 2, w, 4, 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(True),
            nn.ConvTranspose2d(w, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)


# -- BERT-small -----------------------------------------------------------------------------------
BERT_VOCAB, BERT_MAX_POS, BERT_HIDDEN, BERT_HEADS, BERT_LAYERS, BERT_SEQ, BERT_FFN = \
    30522, 512, 256, 4, 4, 128, 1024


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), \
            nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def _split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)       # [b, heads, s, d]

    def forward(self, x):
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(scores.softmax(dim=-1), v)
        b, _, s, _ = ctx.shape
        return self.out(ctx.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class EncoderLayer(nn.Module):
    """Post-LayerNorm transformer layer, as in BERT: LN(x + attn(x)), then LN(y + ffn(y))."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x):
        y = self.norm1(x + self.attention(x))
        return self.norm2(y + self.ffn(y))


class BertSmall(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(BERT_VOCAB, BERT_HIDDEN)
        self.position_embeddings = nn.Embedding(BERT_MAX_POS, BERT_HIDDEN)
        self.norm = nn.LayerNorm(BERT_HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(BERT_HIDDEN, BERT_HEADS, BERT_FFN) for _ in range(BERT_LAYERS))
        self.register_buffer("position_ids", torch.arange(BERT_MAX_POS).unsqueeze(0), persistent=False)

    def forward(self, input_ids):
        positions = self.position_ids[:, :input_ids.shape[1]]
        x = self.norm(self.word_embeddings(input_ids) + self.position_embeddings(positions))
        for layer in self.layers:
            x = layer(x)
        return x


# -- LSTM language model --------------------------------------------------------------------------
LSTM_VOCAB, LSTM_HIDDEN, LSTM_STEPS, LSTM_LAYERS = 10000, 650, 35, 2


class LSTMLanguageModel(nn.Module):
    """Zaremba et al. 2014, "medium": tokens [steps, batch] -> logits [steps, batch, vocab]."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(LSTM_VOCAB, LSTM_HIDDEN)
        self.lstm = nn.LSTM(LSTM_HIDDEN, LSTM_HIDDEN, num_layers=LSTM_LAYERS)
        self.decoder = nn.Linear(LSTM_HIDDEN, LSTM_VOCAB)

    def forward(self, tokens):
        out, _ = self.lstm(self.embedding(tokens))
        return self.decoder(out)


# -- the table ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """How to build a workload's module and its example inputs (name -> array, in order)."""
    build: Callable[[], nn.Module]
    inputs: Callable[[np.random.Generator], dict]
    output_names: tuple


def _image(shape):
    return lambda rng: {"input": rng.normal(0.0, 1.0, size=shape).astype(np.float32)}


WORKLOADS: dict[str, Workload] = {
    "resnet18": Workload(ResNet18, _image((1, 3, 224, 224)), ("logits",)),
    "mobilenet_v1": Workload(MobileNetV1, _image((1, 3, 224, 224)), ("logits",)),
    "dqn": Workload(DQN, lambda rng: {"frames": rng.uniform(0.0, 1.0, size=(1, 4, 84, 84)).astype(np.float32)},
                    ("q_values",)),
    "dcgan_generator": Workload(DCGANGenerator,
                                lambda rng: {"latent": rng.normal(0.0, 1.0, size=(1, 100, 1, 1)).astype(np.float32)},
                                ("image",)),
    "bert_encoder": Workload(BertSmall, lambda rng: {"input_ids": rng.integers(0, BERT_VOCAB, size=(1, BERT_SEQ))},
                             ("hidden_states",)),
    "lstm_lm": Workload(LSTMLanguageModel,
                        lambda rng: {"tokens": rng.integers(0, LSTM_VOCAB, size=(LSTM_STEPS, 1))}, ("logits",)),
}

NAMES: list[str] = list(WORKLOADS)


def randomize_batch_norms(module: nn.Module, generator: torch.Generator) -> None:
    """Running statistics and affine parameters away from their identity initial values (batch
    norms that keep statistics; affine parameters where they have them)."""
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d) and m.running_mean is not None:
            c = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(0.1 * torch.randn(c, generator=generator))
                m.running_var.copy_(0.5 + torch.rand(c, generator=generator))
                if m.affine:
                    m.weight.copy_(0.5 + 0.5 * torch.rand(c, generator=generator))
                    m.bias.copy_(0.1 * torch.randn(c, generator=generator))


def get(name: str, seed: int = 0) -> tuple[nn.Module, dict]:
    """(module in eval mode, {input name: example input}) for the named workload; the same
    (name, seed) always gives the same weights and inputs."""
    try:
        workload = WORKLOADS[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; benchmarks/exports has {', '.join(NAMES)}") from None
    torch.manual_seed(seed)
    module = workload.build()
    randomize_batch_norms(module, torch.Generator().manual_seed(seed + 1))
    feeds = {n: np.asarray(a) for n, a in workload.inputs(np.random.default_rng(seed)).items()}
    return module.eval(), feeds


def input_names(name: str) -> list[str]:
    return list(WORKLOADS[name].inputs(np.random.default_rng(0)))


def output_names(name: str) -> list[str]:
    return list(WORKLOADS[name].output_names)
