"""More kinds of models as users write them in plain torch.nn and export them with
`torch.onnx.export`, as NAME.onnx + NAME.npz (the folder layout `e2e.py --onnx` reads).  The
paper's six (benchmarks/exports/) and the `transformers` architectures (architectures.py) leave
out patterns these have:

    python benchmarks/plain_torch.py DIR [--only unet,yolo] [--exporter torchscript]
    python benchmarks/e2e.py --onnx DIR --threads 1,2

  unet          4-level U-Net on 1x3x256x256 (max pools, 2x2 stride-2 ConvTranspose2d, skip concats)
  yolo          a YOLO-style detector on 320x320 (SiLU, CSP blocks, SPPF's 5x5 stride-1 max pools,
                nearest upsampling, three 1x1 heads)
  shufflenet    ShuffleNetV2 1.0x (channel split, channel shuffle as view/transpose/view)
  mobilenet_v3  MobileNetV3-Small (hardswish, squeeze-and-excitation with hardsigmoid, 5x5 depthwise)
  densenet      DenseNet-121's layout (growth 32, concatenations within blocks, average-pool
                transitions)
  alexnet       AlexNet (11x11 stride-4 stem, 3x3 stride-2 max pools, 9216 -> 4096 -> 4096 -> 1000
                Linear layers: batch-1 products with 150 MB of weights)
  deeplab       DeepLabV3's ASPP head (atrous 3x3 convs at rates 6, 12, 18, image pooling) on a
                dilated ResNet-style backbone (output stride 8), bilinear upsampling to 256x256
  inception     Inception-v3's factorized blocks (1x7 / 7x1 convs, 3x3 average pools with padding)
  r3d           an 18-layer 3-D ResNet for video clips (Conv3d, BatchNorm3d) on 1x3x8x112x112
  gru_asr       a speech recognizer: strided conv1d over 80 mel bins, 2-layer bidirectional GRU
                of 256, Linear to 32 characters, over 400 frames
  tcn           a temporal conv net: causal dilated conv1d (dilations 1..128, left padding),
                residual blocks, over 2048 steps
  espcn         ESPCN super-resolution x3 (5x5 and 3x3 convs, PixelShuffle) on 1x1x224x224
  vae_decoder   a VAE decoder: Linear to 4x4x512, bilinear upsampling and 3x3 convs to 128x128,
                GroupNorm and SiLU
  tr_decoder    nn.TransformerDecoder (4 layers of width 512, causal self-attention and
                cross-attention over 64 memory tokens, 48 target tokens)
  squeezenet    SqueezeNet 1.1 (fire modules: 1x1 squeeze, concatenated 1x1 and 3x3 expands;
                ceil-mode max pools, a 1x1 conv classifier)
  googlenet     GoogLeNet (Inception v1: four-branch concatenations with a max-pool branch)
  vgg11         VGG-11 (3x3 convs with biases, 2x2 max pools, 25088 -> 4096 -> 4096 -> 1000)
  fpn           an FPN segmenter on 1x3x256x512 (laterals, nearest up-sampling and adds, every
                level up-sampled bilinearly to stride 4 and summed)
  wavenet       WaveNet (gated tanh x sigmoid dilated causal conv1d, dilations 1..512 twice,
                residual and skip 1x1 convs) over 4000 samples

Weights: PyTorch's own initialization under a fixed seed, batch norms with non-trivial running
statistics (benchmarks/exports/models.py's randomize_batch_norms).  Each export is run by ONNX
Runtime and checked against eager PyTorch before it is kept (rtol 1e-3, atol 1e-4 of the output's
scale).  The file's metadata names the model and seed, so `e2e.py --onnx` times the very module
as the PyTorch peer (`get(name, seed)`).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "exports"))   # models.py, export.py


def _modules():
    """name -> (builder of the module, example input shapes or arrays); torch imported here."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def cbr(cin, cout, k=3, s=1, p=None, g=1, act=nn.ReLU, d=1):
        p = (k // 2) * d if p is None else p
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, p, dilation=d, groups=g, bias=False),
                             nn.BatchNorm2d(cout), act())

    # -- U-Net ----------------------------------------------------------------------------------
    class UNet(nn.Module):
        def __init__(self, base=32):
            super().__init__()
            ch = [base, base * 2, base * 4, base * 8, base * 16]
            self.down = nn.ModuleList()
            cin = 3
            for c in ch:
                self.down.append(nn.Sequential(cbr(cin, c), cbr(c, c)))
                cin = c
            self.up = nn.ModuleList(nn.ConvTranspose2d(ch[i + 1], ch[i], 2, 2) for i in reversed(range(4)))
            self.dec = nn.ModuleList(nn.Sequential(cbr(2 * ch[i], ch[i]), cbr(ch[i], ch[i]))
                                     for i in reversed(range(4)))
            self.head = nn.Conv2d(base, 2, 1)

        def forward(self, x):
            skips = []
            for k, block in enumerate(self.down):
                x = block(x if k == 0 else F.max_pool2d(x, 2))
                skips.append(x)
            x = skips.pop()
            for up, dec in zip(self.up, self.dec):
                x = dec(torch.cat([up(x), skips.pop()], 1))
            return self.head(x)

    # -- YOLO-style detector --------------------------------------------------------------------
    def cbs(cin, cout, k=1, s=1, p=None):
        return cbr(cin, cout, k, s, p, act=nn.SiLU)

    class Bottleneck(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.b = cbs(c, c, 1), cbs(c, c, 3)

        def forward(self, x):
            return x + self.b(self.a(x))

    class C3(nn.Module):
        def __init__(self, cin, cout, n=1):
            super().__init__()
            h = cout // 2
            self.cv1, self.cv2, self.cv3 = cbs(cin, h), cbs(cin, h), cbs(2 * h, cout)
            self.m = nn.Sequential(*(Bottleneck(h) for _ in range(n)))

        def forward(self, x):
            return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))

    class SPPF(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = cbs(c, c // 2), cbs(2 * c, c)

        def forward(self, x):
            x = self.cv1(x)
            y1 = F.max_pool2d(x, 5, 1, 2)
            y2 = F.max_pool2d(y1, 5, 1, 2)
            y3 = F.max_pool2d(y2, 5, 1, 2)
            return self.cv2(torch.cat([x, y1, y2, y3], 1))

    class Yolo(nn.Module):
        def __init__(self, w=32, classes=80):
            super().__init__()
            self.stem = cbs(3, w, 6, 2, 2)
            self.s2 = nn.Sequential(cbs(w, 2 * w, 3, 2), C3(2 * w, 2 * w, 1))
            self.s3 = nn.Sequential(cbs(2 * w, 4 * w, 3, 2), C3(4 * w, 4 * w, 2))
            self.s4 = nn.Sequential(cbs(4 * w, 8 * w, 3, 2), C3(8 * w, 8 * w, 3))
            self.s5 = nn.Sequential(cbs(8 * w, 16 * w, 3, 2), C3(16 * w, 16 * w, 1), SPPF(16 * w))
            self.lat5, self.td4 = cbs(16 * w, 8 * w), C3(16 * w, 8 * w)
            self.lat4, self.td3 = cbs(8 * w, 4 * w), C3(8 * w, 4 * w)
            self.heads = nn.ModuleList(nn.Conv2d(c, 3 * (5 + classes), 1) for c in (4 * w, 8 * w, 16 * w))

        def forward(self, x):
            x3 = self.s3(self.s2(self.stem(x)))
            x4 = self.s4(x3)
            x5 = self.s5(x4)
            p5 = self.lat5(x5)
            p4 = self.lat4(self.td4(torch.cat([F.interpolate(p5, scale_factor=2.0, mode="nearest"), x4], 1)))
            p3 = self.td3(torch.cat([F.interpolate(p4, scale_factor=2.0, mode="nearest"), x3], 1))
            outs = [h(p) for h, p in zip(self.heads, (p3, x4, x5))]
            return torch.cat([o.flatten(2) for o in outs], 2)

    # -- ShuffleNetV2 ---------------------------------------------------------------------------
    def shuffle(x, groups=2):
        n, c, h, w = x.shape
        return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)

    class ShuffleUnit(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.stride = stride
            h = cout // 2
            if stride == 2:
                self.left = nn.Sequential(cbr(cin, cin, 3, 2, g=cin, act=nn.Identity), cbr(cin, h, 1))
            self.right = nn.Sequential(cbr(cin if stride == 2 else h, h, 1), cbr(h, h, 3, stride, g=h, act=nn.Identity),
                                       cbr(h, h, 1))

        def forward(self, x):
            if self.stride == 1:
                a, b = x.chunk(2, 1)
                return shuffle(torch.cat([a, self.right(b)], 1))
            return shuffle(torch.cat([self.left(x), self.right(x)], 1))

    class ShuffleNet(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [cbr(3, 24, 3, 2), nn.MaxPool2d(3, 2, 1)]
            cin = 24
            for cout, n in ((116, 4), (232, 8), (464, 4)):
                layers += [ShuffleUnit(cin, cout, 2)] + [ShuffleUnit(cout, cout, 1) for _ in range(n - 1)]
                cin = cout
            layers.append(cbr(cin, 1024, 1))
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(1024, 1000)

        def forward(self, x):
            return self.fc(self.features(x).mean((2, 3)))

    # -- MobileNetV3-Small ----------------------------------------------------------------------
    class SE(nn.Module):
        def __init__(self, c, r=4):
            super().__init__()
            s = max(8, (c // r + 4) // 8 * 8)
            self.fc1, self.fc2 = nn.Conv2d(c, s, 1), nn.Conv2d(s, c, 1)

        def forward(self, x):
            w = F.adaptive_avg_pool2d(x, 1)
            return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(w))))

    class InvRes(nn.Module):
        def __init__(self, cin, k, exp, cout, se, act, s):
            super().__init__()
            layers = [] if exp == cin else [cbr(cin, exp, 1, act=act)]
            layers.append(cbr(exp, exp, k, s, g=exp, act=act))
            if se:
                layers.append(SE(exp))
            layers.append(cbr(exp, cout, 1, act=nn.Identity))
            self.block = nn.Sequential(*layers)
            self.res = s == 1 and cin == cout

        def forward(self, x):
            y = self.block(x)
            return x + y if self.res else y

    class MobileNetV3(nn.Module):
        def __init__(self):
            super().__init__()
            HS, RE = nn.Hardswish, nn.ReLU
            cfg = [(16, 3, 16, 16, True, RE, 2), (16, 3, 72, 24, False, RE, 2), (24, 3, 88, 24, False, RE, 1),
                   (24, 5, 96, 40, True, HS, 2), (40, 5, 240, 40, True, HS, 1), (40, 5, 240, 40, True, HS, 1),
                   (40, 5, 120, 48, True, HS, 1), (48, 5, 144, 48, True, HS, 1), (48, 5, 288, 96, True, HS, 2),
                   (96, 5, 576, 96, True, HS, 1), (96, 5, 576, 96, True, HS, 1)]
            self.features = nn.Sequential(cbr(3, 16, 3, 2, act=HS), *(InvRes(*c) for c in cfg), cbr(96, 576, 1, act=HS))
            self.head = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Linear(1024, 1000))

        def forward(self, x):
            return self.head(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))

    # -- DenseNet-121 ---------------------------------------------------------------------------
    class DenseLayer(nn.Module):
        def __init__(self, cin, growth=32):
            super().__init__()
            self.f = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, 4 * growth, 1, bias=False),
                                   nn.BatchNorm2d(4 * growth), nn.ReLU(), nn.Conv2d(4 * growth, growth, 3, 1, 1, bias=False))

        def forward(self, feats):
            return self.f(torch.cat(feats, 1))

    class DenseBlock(nn.Module):
        def __init__(self, n, cin):
            super().__init__()
            self.layers = nn.ModuleList(DenseLayer(cin + 32 * i) for i in range(n))

        def forward(self, x):
            feats = [x]
            for layer in self.layers:
                feats.append(layer(feats))
            return torch.cat(feats, 1)

    class DenseNet(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
            c = 64
            for k, n in enumerate((6, 12, 24, 16)):
                layers.append(DenseBlock(n, c))
                c += 32 * n
                if k < 3:
                    layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2, 2)]
                    c //= 2
            layers += [nn.BatchNorm2d(c), nn.ReLU()]
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(c, 1000)

        def forward(self, x):
            return self.fc(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))

    # -- AlexNet --------------------------------------------------------------------------------
    class AlexNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
                nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
                nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(), nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
                nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
            self.classifier = nn.Sequential(nn.Linear(9216, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                                            nn.Linear(4096, 1000))

        def forward(self, x):
            return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 6), 1))

    # -- DeepLabV3 (ASPP) -----------------------------------------------------------------------
    class Res(nn.Module):
        def __init__(self, cin, cout, s, d):
            super().__init__()
            self.a, self.b = cbr(cin, cout, 3, s, d=d), cbr(cout, cout, 3, d=d, act=nn.Identity)
            self.proj = None if s == 1 and cin == cout else cbr(cin, cout, 1, s, act=nn.Identity)

        def forward(self, x):
            return F.relu(self.b(self.a(x)) + (x if self.proj is None else self.proj(x)))

    class DeepLab(nn.Module):
        def __init__(self, classes=21):
            super().__init__()
            self.backbone = nn.Sequential(cbr(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1), Res(64, 64, 1, 1), Res(64, 128, 2, 1),
                                          Res(128, 256, 1, 2), Res(256, 256, 1, 2), Res(256, 512, 1, 4))
            self.aspp = nn.ModuleList([cbr(512, 256, 1)] + [cbr(512, 256, 3, d=r) for r in (6, 12, 18)])
            self.pool = cbr(512, 256, 1)
            self.project = cbr(5 * 256, 256, 1)
            self.head = nn.Sequential(cbr(256, 256, 3), nn.Conv2d(256, classes, 1))

        def forward(self, x):
            size = x.shape[-2:]
            f = self.backbone(x)
            pooled = F.interpolate(self.pool(F.adaptive_avg_pool2d(f, 1)), size=f.shape[-2:], mode="bilinear",
                                   align_corners=False)
            y = self.project(torch.cat([b(f) for b in self.aspp] + [pooled], 1))
            return F.interpolate(self.head(y), size=size, mode="bilinear", align_corners=False)

    # -- Inception-v3 blocks --------------------------------------------------------------------
    class InceptionC(nn.Module):
        def __init__(self, cin, c7):
            super().__init__()
            self.b1 = cbr(cin, 192, 1)
            self.b7 = nn.Sequential(cbr(cin, c7, 1), cbr(c7, c7, (1, 7), p=(0, 3)), cbr(c7, 192, (7, 1), p=(3, 0)))
            self.b77 = nn.Sequential(cbr(cin, c7, 1), cbr(c7, c7, (7, 1), p=(3, 0)), cbr(c7, c7, (1, 7), p=(0, 3)),
                                     cbr(c7, c7, (7, 1), p=(3, 0)), cbr(c7, 192, (1, 7), p=(0, 3)))
            self.bp = cbr(cin, 192, 1)

        def forward(self, x):
            return torch.cat([self.b1(x), self.b7(x), self.b77(x), self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)

    class Inception(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(cbr(3, 32, 3, 2, p=0), cbr(32, 64, 3), nn.MaxPool2d(3, 2), cbr(64, 192, 3, 2, p=0))
            self.blocks = nn.Sequential(cbr(192, 768, 1), InceptionC(768, 128), InceptionC(768, 160),
                                        InceptionC(768, 192))
            self.fc = nn.Linear(768, 1000)

        def forward(self, x):
            return self.fc(self.blocks(self.stem(x)).mean((2, 3)))

    # -- R3D-18 ---------------------------------------------------------------------------------
    def cbr3(cin, cout, k, s, p, act=True):
        layers = [nn.Conv3d(cin, cout, k, s, p, bias=False), nn.BatchNorm3d(cout)]
        return nn.Sequential(*(layers + [nn.ReLU()] if act else layers))

    class Block3(nn.Module):
        def __init__(self, cin, cout, s):
            super().__init__()
            self.a, self.b = cbr3(cin, cout, 3, s, 1), cbr3(cout, cout, 3, 1, 1, act=False)
            self.proj = None if s == 1 and cin == cout else cbr3(cin, cout, 1, s, 0, act=False)

        def forward(self, x):
            return F.relu(self.b(self.a(x)) + (x if self.proj is None else self.proj(x)))

    class R3D(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [cbr3(3, 64, (3, 7, 7), (1, 2, 2), (1, 3, 3))]
            cin = 64
            for c, s in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [Block3(cin, c, s), Block3(c, c, 1)]
                cin = c
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(512, 400)

        def forward(self, x):
            return self.fc(F.adaptive_avg_pool3d(self.features(x), 1).flatten(1))

    # -- GRU speech recognizer ------------------------------------------------------------------
    class GruAsr(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv1d(80, 256, 5, 2, 2), nn.ReLU(), nn.Conv1d(256, 256, 3, 1, 1), nn.ReLU())
            self.gru = nn.GRU(256, 256, num_layers=2, bidirectional=True, batch_first=True)
            self.out = nn.Linear(512, 32)

        def forward(self, x):
            y, _ = self.gru(self.conv(x).transpose(1, 2))
            return self.out(y).log_softmax(-1)

    # -- TCN ------------------------------------------------------------------------------------
    class TcnBlock(nn.Module):
        def __init__(self, c, d):
            super().__init__()
            self.d = d
            self.c1, self.c2 = nn.Conv1d(c, c, 3, dilation=d), nn.Conv1d(c, c, 3, dilation=d)

        def forward(self, x):
            y = F.relu(self.c1(F.pad(x, (2 * self.d, 0))))
            y = F.relu(self.c2(F.pad(y, (2 * self.d, 0))))
            return F.relu(x + y)

    class Tcn(nn.Module):
        def __init__(self, c=128):
            super().__init__()
            self.inp = nn.Conv1d(16, c, 1)
            self.blocks = nn.Sequential(*(TcnBlock(c, 2 ** k) for k in range(8)))
            self.out = nn.Conv1d(c, 8, 1)

        def forward(self, x):
            return self.out(self.blocks(self.inp(x)))

    # -- ESPCN ----------------------------------------------------------------------------------
    class Espcn(nn.Module):
        def __init__(self, r=3):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(1, 64, 5, padding=2), nn.Tanh(), nn.Conv2d(64, 32, 3, padding=1),
                                      nn.Tanh(), nn.Conv2d(32, r * r, 3, padding=1), nn.PixelShuffle(r))

        def forward(self, x):
            return torch.sigmoid(self.body(x))

    # -- VAE decoder ----------------------------------------------------------------------------
    class Up(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1)

        def forward(self, x):
            x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
            y = self.c2(F.silu(self.n2(self.c1(F.silu(self.n1(x))))))
            return y + self.skip(x)

    class VaeDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(128, 512 * 4 * 4)
            self.ups = nn.Sequential(Up(512, 256), Up(256, 256), Up(256, 128), Up(128, 64), Up(64, 64))
            self.out = nn.Conv2d(64, 3, 3, padding=1)

        def forward(self, z):
            return torch.tanh(self.out(self.ups(self.fc(z).view(-1, 512, 4, 4))))

    # -- Transformer decoder --------------------------------------------------------------------
    class TrDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerDecoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
            self.dec = nn.TransformerDecoder(layer, 4)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(48))

        def forward(self, tgt, memory):
            return self.dec(tgt, memory, tgt_mask=self.mask, tgt_is_causal=True)

    # -- SqueezeNet 1.1 -------------------------------------------------------------------------
    class Fire(nn.Module):
        def __init__(self, cin, squeeze, expand):
            super().__init__()
            self.s = nn.Conv2d(cin, squeeze, 1)
            self.e1, self.e3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3, padding=1)

        def forward(self, x):
            x = F.relu(self.s(x))
            return torch.cat([F.relu(self.e1(x)), F.relu(self.e3(x))], 1)

    class SqueezeNet(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            pool = nn.MaxPool2d(3, 2, ceil_mode=True)
            self.features = nn.Sequential(nn.Conv2d(3, 64, 3, 2), nn.ReLU(), pool, Fire(64, 16, 64), Fire(128, 16, 64),
                                          pool, Fire(128, 32, 128), Fire(256, 32, 128), pool, Fire(256, 48, 192),
                                          Fire(384, 48, 192), Fire(384, 64, 256), Fire(512, 64, 256))
            self.classifier = nn.Conv2d(512, classes, 1)

        def forward(self, x):
            return F.adaptive_avg_pool2d(F.relu(self.classifier(self.features(x))), 1).flatten(1)

    # -- GoogLeNet (Inception v1) ---------------------------------------------------------------
    class InceptionA(nn.Module):
        def __init__(self, cin, c1, c3r, c3, c5r, c5, pp):
            super().__init__()
            self.b1 = cbr(cin, c1, 1)
            self.b3 = nn.Sequential(cbr(cin, c3r, 1), cbr(c3r, c3, 3))
            self.b5 = nn.Sequential(cbr(cin, c5r, 1), cbr(c5r, c5, 3))    # torchvision's 3x3 in place of 5x5
            self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), cbr(cin, pp, 1))

        def forward(self, x):
            return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)

    class GoogLeNet(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            pool = nn.MaxPool2d(3, 2, ceil_mode=True)
            self.stem = nn.Sequential(cbr(3, 64, 7, 2), pool, cbr(64, 64, 1), cbr(64, 192, 3), pool)
            self.body = nn.Sequential(
                InceptionA(192, 64, 96, 128, 16, 32, 32), InceptionA(256, 128, 128, 192, 32, 96, 64), pool,
                InceptionA(480, 192, 96, 208, 16, 48, 64), InceptionA(512, 160, 112, 224, 24, 64, 64),
                InceptionA(512, 128, 128, 256, 24, 64, 64), InceptionA(512, 112, 144, 288, 32, 64, 64),
                InceptionA(528, 256, 160, 320, 32, 128, 128), nn.MaxPool2d(2, 2, ceil_mode=True),
                InceptionA(832, 256, 160, 320, 32, 128, 128), InceptionA(832, 384, 192, 384, 48, 128, 128))
            self.fc = nn.Linear(1024, classes)

        def forward(self, x):
            return self.fc(self.body(self.stem(x)).mean((2, 3)))

    # -- VGG-11 ---------------------------------------------------------------------------------
    class Vgg(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            layers, cin = [], 3
            for c in (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"):
                if c == "M":
                    layers.append(nn.MaxPool2d(2))
                else:
                    layers += [nn.Conv2d(cin, c, 3, padding=1), nn.ReLU(inplace=True)]
                    cin = c
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                                            nn.Linear(4096, classes))

        def forward(self, x):
            return self.classifier(torch.flatten(self.features(x), 1))

    # -- FPN segmenter --------------------------------------------------------------------------
    class Fpn(nn.Module):
        """A ResNet-style backbone (strides 4-32), an FPN (1x1 laterals, nearest 2x up-sampling
        and adds, 3x3 smoothing), the levels up-sampled bilinearly to stride 4, summed and
        classified per pixel (a panoptic-FPN-style semantic head)."""

        def __init__(self, classes=19, width=128):
            super().__init__()
            self.stem = nn.Sequential(cbr(3, 32, 3, 2), cbr(32, 64, 3, 2))
            chans = (64, 128, 256, 512)
            self.stages = nn.ModuleList(nn.Sequential(cbr(cin, c, 3, 1 if k == 0 else 2), cbr(c, c))
                                        for k, (cin, c) in enumerate(zip((64,) + chans[:-1], chans)))
            self.lateral = nn.ModuleList(nn.Conv2d(c, width, 1) for c in chans)
            self.smooth = nn.ModuleList(cbr(width, width) for _ in chans)
            self.classify = nn.Conv2d(width, classes, 1)

        def forward(self, x):
            feats, x = [], self.stem(x)
            for stage in self.stages:
                x = stage(x)
                feats.append(x)
            p = self.lateral[-1](feats[-1])
            levels = [p]
            for k in (2, 1, 0):
                p = self.lateral[k](feats[k]) + F.interpolate(p, scale_factor=2.0, mode="nearest")
                levels.insert(0, p)
            size = levels[0].shape[-2:]
            total = sum(F.interpolate(s(q), size=size, mode="bilinear", align_corners=False) if k else s(q)
                        for k, (s, q) in enumerate(zip(self.smooth, levels)))
            return self.classify(total)

    # -- WaveNet --------------------------------------------------------------------------------
    class WaveBlock(nn.Module):
        def __init__(self, c, skip, d):
            super().__init__()
            self.d = d
            self.filt, self.gate = nn.Conv1d(c, c, 2, dilation=d), nn.Conv1d(c, c, 2, dilation=d)
            self.res, self.skip = nn.Conv1d(c, c, 1), nn.Conv1d(c, skip, 1)

        def forward(self, x):
            h = F.pad(x, (self.d, 0))
            z = torch.tanh(self.filt(h)) * torch.sigmoid(self.gate(h))
            return x + self.res(z), self.skip(z)

    class WaveNet(nn.Module):
        """Gated dilated causal conv1d layers (dilations 1..512, twice), residual and skip 1x1s,
        over 4000 samples of 32 input channels."""

        def __init__(self, c=64, skip=128):
            super().__init__()
            self.inp = nn.Conv1d(32, c, 1)
            self.blocks = nn.ModuleList(WaveBlock(c, skip, 2 ** (k % 10)) for k in range(20))
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(skip, skip, 1), nn.ReLU(), nn.Conv1d(skip, 256, 1))

        def forward(self, x):
            x, total = self.inp(x), 0
            for block in self.blocks:
                x, s = block(x)
                total = total + s
            return self.out(total)

    return {
        "unet": (UNet, [(1, 3, 256, 256)]),
        "yolo": (Yolo, [(1, 3, 320, 320)]),
        "shufflenet": (ShuffleNet, [(1, 3, 224, 224)]),
        "mobilenet_v3": (MobileNetV3, [(1, 3, 224, 224)]),
        "densenet": (DenseNet, [(1, 3, 224, 224)]),
        "alexnet": (AlexNet, [(1, 3, 224, 224)]),
        "deeplab": (DeepLab, [(1, 3, 256, 256)]),
        "inception": (Inception, [(1, 3, 147, 147)]),
        "r3d": (R3D, [(1, 3, 8, 112, 112)]),
        "gru_asr": (GruAsr, [(1, 80, 400)]),
        "tcn": (Tcn, [(1, 16, 2048)]),
        "espcn": (Espcn, [(1, 1, 224, 224)]),
        "vae_decoder": (VaeDecoder, [(1, 128)]),
        "tr_decoder": (TrDecoder, [(1, 48, 512), (1, 64, 512)]),
        "squeezenet": (SqueezeNet, [(1, 3, 224, 224)]),
        "googlenet": (GoogLeNet, [(1, 3, 224, 224)]),
        "vgg11": (Vgg, [(1, 3, 224, 224)]),
        "fpn": (Fpn, [(1, 3, 256, 512)]),
        "wavenet": (WaveNet, [(1, 32, 4000)]),
    }


NAMES = ("unet", "yolo", "shufflenet", "mobilenet_v3", "densenet", "alexnet", "deeplab", "inception", "r3d",
         "gru_asr", "tcn", "espcn", "vae_decoder", "tr_decoder", "squeezenet", "googlenet", "vgg11", "fpn", "wavenet")


WORKLOAD_PREFIX = "plain_torch:"     # the metadata's workload name: e2e.py times this very module


def get(name: str, seed: int = 0) -> tuple:
    """(module in eval mode, {input name: example input}) of model `name`; the same (name, seed)
    always gives the same weights and inputs."""
    import torch
    from models import randomize_batch_norms

    build, shapes = _modules()[name]
    torch.manual_seed(seed)
    module = build().eval()
    randomize_batch_norms(module, torch.Generator().manual_seed(seed + 1))
    rng = np.random.default_rng(seed)
    names = ["input"] if len(shapes) == 1 else [f"input{k}" for k in range(len(shapes))]
    return module, {n: rng.normal(0.0, 1.0, size=s).astype(np.float32) for n, s in zip(names, shapes)}


def export(name: str, out: Path, exporter: str, seed: int = 0) -> None:
    import onnx
    import onnxruntime as ort
    import torch
    from export import name_workload, quiet_export

    module, feeds = get(name, seed)
    args = tuple(torch.from_numpy(a) for a in feeds.values())
    with torch.no_grad():
        expected = module(*args).numpy()
    path, data = out / f"{name}.onnx", out / f"{name}.onnx.data"
    data.unlink(missing_ok=True)
    quiet_export(module, args, str(path), list(feeds), ["output"], exporter)
    proto = onnx.load(str(path))
    name_workload(proto, WORKLOAD_PREFIX + name, seed)
    external = data.exists()
    data.unlink(missing_ok=True)
    onnx.save(proto, str(path), **({"save_as_external_data": True, "location": data.name} if external else {}))
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4 * (float(np.abs(expected).max()) or 1.0),
                               err_msg=f"{name}: the export run by ONNX Runtime differs from eager PyTorch")
    np.savez(out / f"{name}.npz", **feeds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the folder to write NAME.onnx and NAME.npz into")
    ap.add_argument("--only", help="comma-separated names (default: all)")
    ap.add_argument("--exporter", choices=("auto", "dynamo", "torchscript"), default="auto")
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("plain_torch.py needs the [torch] extra", file=sys.stderr)
        return 1
    from export import export_each, resolve_exporter, select_names

    names = select_names(args.only, NAMES, "model")
    if names is None:
        return 1
    exporter = resolve_exporter(args.exporter)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def quiet(name: str) -> None:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            export(name, out, exporter)

    return export_each(names, out, quiet)

if __name__ == "__main__":
    sys.exit(main())
