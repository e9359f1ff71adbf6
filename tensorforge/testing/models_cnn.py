"""Convolutional workloads of the TVM paper, written as ONNX graphs with random weights:
ResNet-18, MobileNet v1, the Nature DQN and the DCGAN generator.

Each builder takes (batch, seed) and returns (onnx.ModelProto, {input name: example input}).
Topologies follow the reference implementations (torchvision ResNet-18, the MobileNet v1 paper's
table 1, Mnih et al. 2015, Radford et al. 2016); weights use He initialization and batch norms
carry non-trivial running statistics so every layer's output is numerically meaningful.
"""
from __future__ import annotations

import numpy as np

from .models_builder import OnnxModelBuilder


# -- ResNet-18 ------------------------------------------------------------------------------------
def _basic_block(mb: OnnxModelBuilder, x: str, cin: int, cout: int, stride: int, base: str) -> str:
    """conv3x3-bn-relu-conv3x3-bn, plus the (projected) shortcut, then relu."""
    y = mb.relu(mb.batch_norm(mb.conv(x, cin, cout, 3, stride, 1, base=f"{base}_conv1"), cout, f"{base}_bn1"))
    # a smaller last gamma keeps the residual sum's variance from growing block after block
    y = mb.batch_norm(mb.conv(y, cout, cout, 3, 1, 1, base=f"{base}_conv2"), cout, f"{base}_bn2",
                      gamma_scale=0.5)
    shortcut = x
    if stride != 1 or cin != cout:
        shortcut = mb.batch_norm(mb.conv(x, cin, cout, 1, stride, 0, base=f"{base}_down"), cout,
                                 f"{base}_down_bn")
    return mb.relu(mb.node("Add", [y, shortcut], f"{base}_add"))


def resnet18(batch: int = 1, seed: int = 0):
    """torchvision resnet18: 224x224 RGB -> 1000 logits."""
    mb = OnnxModelBuilder("resnet18", seed)
    x = mb.input("input", (batch, 3, 224, 224))
    y = mb.relu(mb.batch_norm(mb.conv(x, 3, 64, 7, 2, 3, base="conv1"), 64, "bn1"))
    y = mb.node("MaxPool", [y], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            y = _basic_block(mb, y, cin, cout, stride, f"layer{stage}_{block}")
            cin = cout
    y = mb.node("Flatten", [mb.node("GlobalAveragePool", [y], "avgpool")], "flatten", axis=1)
    y = mb.dense(y, 512, 1000, "fc", gain=1.0)
    model = mb.finish([(y, (batch, 1000))])
    return model, {"input": _image(mb.rng, (batch, 3, 224, 224))}


# -- MobileNet v1 ---------------------------------------------------------------------------------
# (output channels, stride) of the 13 depthwise-separable blocks, table 1 of the paper
_MOBILENET_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                     (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))


def mobilenet_v1(batch: int = 1, seed: int = 0):
    """MobileNet v1 (width 1.0): 224x224 RGB -> 1000 logits; depthwise 3x3 + pointwise 1x1 blocks."""
    mb = OnnxModelBuilder("mobilenet_v1", seed)
    x = mb.input("input", (batch, 3, 224, 224))
    y = mb.relu(mb.batch_norm(mb.conv(x, 3, 32, 3, 2, 1, base="conv0"), 32, "bn0"))
    cin = 32
    for k, (cout, stride) in enumerate(_MOBILENET_BLOCKS, start=1):
        y = mb.conv(y, cin, cin, 3, stride, 1, group=cin, base=f"dw{k}")
        y = mb.relu(mb.batch_norm(y, cin, f"dw{k}_bn"))
        y = mb.relu(mb.batch_norm(mb.conv(y, cin, cout, 1, base=f"pw{k}"), cout, f"pw{k}_bn"))
        cin = cout
    y = mb.node("Flatten", [mb.node("GlobalAveragePool", [y], "avgpool")], "flatten", axis=1)
    y = mb.dense(y, 1024, 1000, "fc", gain=1.0)
    model = mb.finish([(y, (batch, 1000))])
    return model, {"input": _image(mb.rng, (batch, 3, 224, 224))}


# -- DQN ------------------------------------------------------------------------------------------
DQN_ACTIONS = 18   # the full Atari action set


def dqn(batch: int = 1, seed: int = 0):
    """Nature DQN: 4 stacked 84x84 frames -> conv 8x8/4, 4x4/2, 3x3/1 -> fc 512 -> Q per action."""
    mb = OnnxModelBuilder("dqn", seed)
    x = mb.input("frames", (batch, 4, 84, 84))
    y = mb.relu(mb.conv(x, 4, 32, 8, 4, bias=True, base="conv1"))      # 20x20
    y = mb.relu(mb.conv(y, 32, 64, 4, 2, bias=True, base="conv2"))     # 9x9
    y = mb.relu(mb.conv(y, 64, 64, 3, 1, bias=True, base="conv3"))     # 7x7
    y = mb.node("Flatten", [y], "flatten", axis=1)
    y = mb.relu(mb.dense(y, 64 * 7 * 7, 512, "fc1"))
    y = mb.dense(y, 512, DQN_ACTIONS, "fc2", gain=1.0)
    model = mb.finish([(y, (batch, DQN_ACTIONS))])
    frames = mb.rng.uniform(0.0, 1.0, size=(batch, 4, 84, 84)).astype(np.float32)   # scaled pixels
    return model, {"frames": frames}


# -- DCGAN generator ------------------------------------------------------------------------------
def dcgan_generator(batch: int = 1, seed: int = 0):
    """DCGAN generator: latent 100 -> ConvTranspose 4x4 stack (512, 256, 128, 64 channels with
    batch norm + relu) -> 3x64x64 image through tanh."""
    mb = OnnxModelBuilder("dcgan_generator", seed)
    z = mb.input("latent", (batch, 100, 1, 1))
    y = mb.relu(mb.batch_norm(mb.conv_transpose(z, 100, 512, 4, 1, 0, "deconv1"), 512, "bn1"))   # 4x4
    cin = 512
    for k, cout in enumerate((256, 128, 64), start=2):                                          # 8, 16, 32
        y = mb.relu(mb.batch_norm(mb.conv_transpose(y, cin, cout, 4, 2, 1, f"deconv{k}"), cout, f"bn{k}"))
        cin = cout
    y = mb.node("Tanh", [mb.conv_transpose(y, 64, 3, 4, 2, 1, "deconv5", gain=1.0)], "image")    # 64x64
    model = mb.finish([(y, (batch, 3, 64, 64))])
    return model, {"latent": mb.rng.normal(0.0, 1.0, size=(batch, 100, 1, 1)).astype(np.float32)}


def _image(rng: np.random.Generator, shape) -> np.ndarray:
    """A normalized image batch (ImageNet-style mean/std normalization gives roughly N(0, 1))."""
    return rng.normal(0.0, 1.0, size=shape).astype(np.float32)
