#!/usr/bin/env python3
"""Build TinySeg's example segmentation models as fully-integer .tflite files (and one float32).

There is no training data here: weights are seeded random values, so the files
are for memory-planning and runtime tests, not for segmenting images. What
matters for TinySeg is the graph (the long skip connections and the tensor
shapes), and that is faithful to the paper.

Models (see README.md next to this script):
  tiny_unet       the paper's Tiny U-Net (Table 2), exactly.
  vnet2d          a scaled-down 2D V-Net (paper Table 4).
  attention_unet  a scaled-down Attention U-Net (paper Table 4).
  resunet_a       a scaled-down ResUNet-a d6 (paper Table 4).
  keras_unet_float  the Tiny U-Net's topology as a plain Keras U-Net, converted without
                  quantization (float32 throughout; not in --all, which builds the int8 models).
  keras_unet_up3, keras_unet_up3_float
                  keras_unet_float with Conv2DTranspose(3, strides=2) up-sampling, int8 and
                  float32 (not in --all).
  seg_tutorial    TensorFlow's image-segmentation tutorial model (MobileNetV2 encoder, pix2pix
                  decoder), int8 (not in --all).
  mnv3_seg        a small MobileNetV3-style segmenter (SE blocks, LR-ASPP head, bilinear).
  mbv2_w035_r144, mcunetv2_vww_r80, mcunet_320kb_r176
                  msf-CNN's three evaluation networks (classifiers; not in --all; layer lists
                  and their sources at build_mbv2_w035 and MCUNETV2_VWW_5FPS below).

Usage:
  python examples/models/build.py                    # tiny_unet into examples/models/
  python examples/models/build.py --all --out /tmp/models
  python examples/models/build.py --models vnet2d --measure
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator, Sequence

try:  # numpy comes with TensorFlow; without either, main() says what to install
    import numpy as np
except ImportError:  # pragma: no cover - depends on the environment
    np = None  # type: ignore[assignment]

SEED = 20240401
"""One seed for weights, BN statistics and calibration data: same bytes every run."""

PINNED = {"tensorflow": "2.21.0", "keras": "3.15.1"}
"""The versions the committed tiny_unet.tflite was built with. Other versions give other bytes: the
converter writes its version into the model's metadata, and Keras' layers and the converter's
quantisation can change between releases, so `tinyseg verify` may then report different outputs."""

INSTALL_HINT = "pip install tensorflow-cpu==2.21.0 keras==3.15.1  (in the venv: make models-deps)"

Tensor = Any  # a symbolic Keras tensor; TensorFlow is imported lazily


# --------------------------------------------------------------------------
# Model specs
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One buildable model: how to build it and how to calibrate it."""

    name: str
    input_shape: tuple[int, int, int]  # (H, W, C); the batch is 1, or unset with --batch-unset
    build: Callable[..., Any]  # (tf, shape, batch_size) -> Keras model
    calibration_samples: int
    expected_params: int | None = None
    quantization: str = (
        "int8"  # "int8" (uint8 in/out); "16x8": int16 activations, int8 weights; "float32": none
    )
    in_all: bool = True  # built by --all (the int8 models the tests and figures build)


@dataclasses.dataclass(frozen=True)
class BuildResult:
    """What one build produced, for the summary line."""

    name: str
    path: Path
    params: int
    size: int
    seconds: float
    sha256: str
    ops: dict[str, int]


# --------------------------------------------------------------------------
# Tiny U-Net (paper, Table 2)
# --------------------------------------------------------------------------


def _tiny_double_conv(layers: Any, x: Tensor, c: int) -> Tensor:
    """Conv-BN-ReLU twice with ONE shared BN layer, as in the paper's model.

    Sharing the BN layer is what makes the count come out at exactly
    109,725 parameters.
    """
    bn = layers.BatchNormalization()
    x = layers.Conv2D(c, 3, padding="same", use_bias=False)(x)
    x = layers.ReLU()(bn(x))
    x = layers.Conv2D(c, 3, padding="same", use_bias=False)(x)
    return layers.ReLU()(bn(x))


def _tiny_down(layers: Any, x: Tensor, c: int) -> Tensor:
    return _tiny_double_conv(layers, layers.MaxPooling2D(2)(x), c)


def _tiny_up(layers: Any, x: Tensor, skip: Tensor, c: int) -> Tensor:
    up = layers.Conv2DTranspose(c // 2, 2, strides=2)(x)
    return _tiny_double_conv(layers, layers.Concatenate(axis=-1)([skip, up]), c)


def build_tiny_unet(tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1) -> Any:
    """Tiny U-Net: 3 levels down, 3 up, 8..64 channels, raw 1-channel logits."""
    layers = tf.keras.layers
    inp = tf.keras.Input(shape=shape, batch_size=batch_size, name="image")
    x1 = _tiny_double_conv(layers, inp, 8)
    x2 = _tiny_down(layers, x1, 16)
    x3 = _tiny_down(layers, x2, 32)
    x4 = _tiny_down(layers, x3, 64)
    x = _tiny_up(layers, x4, x3, 32)
    x = _tiny_up(layers, x, x2, 16)
    x = _tiny_up(layers, x, x1, 8)
    out = layers.Conv2D(1, 1, name="mask")(x)
    return tf.keras.Model(inp, out, name="tiny_unet")


# --------------------------------------------------------------------------
# 2D V-Net (Milletari et al. 2016), scaled down
# --------------------------------------------------------------------------

VNET_CHANNELS = (8, 16, 32, 64, 128)  # V-Net has 16..256; halved here
VNET_CONVS = (1, 2, 3, 3, 3)  # 5x5 convolutions per stage, as in V-Net


def _prelu(keras: Any, x: Tensor) -> Tensor:
    """Per-channel PReLU, V-Net's activation; alpha starts at the usual 0.25."""
    return keras.layers.PReLU(
        alpha_initializer=keras.initializers.Constant(0.25), shared_axes=[1, 2]
    )(x)


def _vnet_stage(keras: Any, x: Tensor, c: int, n_convs: int) -> Tensor:
    """n 5x5 convs, then add the stage input (V-Net's residual stage)."""
    layers = keras.layers
    y = x
    for i in range(n_convs):
        y = layers.Conv2D(c, 5, padding="same")(y)
        if i < n_convs - 1:
            y = _prelu(keras, y)
    return _prelu(keras, layers.Add()([y, x]))


def build_vnet2d(tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1) -> Any:
    """V-Net in 2D: residual stages, 2x2 stride-2 conv down, transpose conv up.

    Each decoder stage concatenates the up-convolved features with the
    encoder stage of the same resolution (the long skip), as in V-Net. The
    first stage's residual broadcasts the 1-channel input to the stage width
    by concatenating copies of it, as V-Net does.
    """
    keras = tf.keras
    layers = keras.layers
    inp = keras.Input(shape=shape, batch_size=batch_size, name="image")
    c0 = VNET_CHANNELS[0]
    widened = layers.Concatenate(axis=-1)([inp] * (c0 // shape[2]))
    y = layers.Conv2D(c0, 5, padding="same")(inp)
    x = _prelu(keras, layers.Add()([y, widened]))
    skips = [x]
    for c, n in zip(VNET_CHANNELS[1:], VNET_CONVS[1:]):
        x = _prelu(keras, layers.Conv2D(c, 2, strides=2)(x))
        x = _vnet_stage(keras, x, c, n)
        skips.append(x)
    skips.pop()  # the bottom stage feeds the decoder directly
    for c, n, skip in zip(reversed(VNET_CHANNELS[:-1]), reversed(VNET_CONVS[:-1]), reversed(skips)):
        up = _prelu(keras, layers.Conv2DTranspose(c, 2, strides=2)(x))
        x = layers.Concatenate(axis=-1)([up, skip])
        x = _vnet_stage(keras, x, 2 * c, n)
    out = layers.Softmax(axis=-1, name="mask")(layers.Conv2D(2, 1)(x))
    return keras.Model(inp, out, name="vnet2d")


# --------------------------------------------------------------------------
# Attention U-Net (Oktay et al. 2018), scaled down
# --------------------------------------------------------------------------

ATTN_CHANNELS = (16, 32, 64, 128, 256)


def _upsample_nearest(layers: Any, x: Tensor, factor: int) -> Tensor:
    """Nearest-neighbour upsampling that converts to RESIZE_NEAREST_NEIGHBOR.

    Keras 3's UpSampling2D lowers to RESHAPE+TILE, and TFLM has no TILE.
    """
    if factor == 1:
        return x
    h, w = x.shape[1], x.shape[2]
    return layers.Resizing(h * factor, w * factor, interpolation="nearest")(x)


def _conv_bn_relu(layers: Any, x: Tensor, c: int, k: int = 3) -> Tensor:
    x = layers.Conv2D(c, k, padding="same", use_bias=False)(x)
    return layers.ReLU()(layers.BatchNormalization()(x))


def _attention_gate(layers: Any, x: Tensor, g: Tensor, inter: int) -> Tensor:
    """Additive attention gate: x (skip, fine) is weighted by alpha from g (coarse).

    As in Oktay et al.: theta(x) is a 2x2 stride-2 conv to g's grid, phi(g) a
    1x1 conv, psi a 1x1 conv to one channel, sigmoid, then alpha is resampled
    to x's grid and multiplies every channel of x.
    """
    theta = layers.Conv2D(inter, 2, strides=2, use_bias=False)(x)
    phi = layers.Conv2D(inter, 1)(g)
    f = layers.ReLU()(layers.Add()([theta, phi]))
    alpha = layers.Activation("sigmoid")(layers.Conv2D(1, 1)(f))
    alpha = _upsample_nearest(layers, alpha, 2)
    return layers.Multiply()([x, alpha])


def build_attention_unet(
    tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1
) -> Any:
    """U-Net whose every skip passes through an attention gate before concat."""
    layers = tf.keras.layers
    inp = tf.keras.Input(shape=shape, batch_size=batch_size, name="image")
    x = inp
    skips = []
    for i, c in enumerate(ATTN_CHANNELS):
        if i:
            x = layers.MaxPooling2D(2)(x)
        x = _conv_bn_relu(layers, _conv_bn_relu(layers, x, c), c)
        skips.append(x)
    skips.pop()
    for c, skip in zip(reversed(ATTN_CHANNELS[:-1]), reversed(skips)):
        gated = _attention_gate(layers, skip, x, max(c // 2, 1))
        up = layers.Conv2DTranspose(c, 2, strides=2)(x)
        x = layers.Concatenate(axis=-1)([gated, up])
        x = _conv_bn_relu(layers, _conv_bn_relu(layers, x, c), c)
    out = layers.Activation("sigmoid", name="mask")(layers.Conv2D(1, 1)(x))
    return tf.keras.Model(inp, out, name="attention_unet")


# --------------------------------------------------------------------------
# ResUNet-a d6 (Diakogiannis et al. 2020), scaled down
# --------------------------------------------------------------------------

RESA_BASE = 16
RESA_RATES = ((1, 3, 15, 31), (1, 3, 15, 31), (1, 3, 15), (1, 3, 15), (1,), (1,))
RESA_CLASSES = 2


def _bn_relu_conv(layers: Any, x: Tensor, c: int, dilation: int) -> Tensor:
    x = layers.ReLU()(layers.BatchNormalization()(x))
    return layers.Conv2D(c, 3, padding="same", dilation_rate=dilation)(x)


def _resblock_a(layers: Any, x: Tensor, c: int, rates: Sequence[int]) -> Tensor:
    """ResBlock-a: input plus parallel atrous (BN-ReLU-conv)x2 branches."""
    branches = [_bn_relu_conv(layers, _bn_relu_conv(layers, x, c, r), c, r) for r in rates]
    return layers.Add()([x, *branches])


def _psp_pooling(layers: Any, x: Tensor, c: int) -> Tensor:
    """PSP pooling: max-pool at 4 scales, 1x1 conv, upsample, concat, 1x1 conv."""
    h = x.shape[1]
    parts = [x]
    for k in (1, 2, 4, 8):
        p = layers.MaxPooling2D(h // k)(x) if h // k > 1 else x
        p = _conv_bn_relu(layers, p, c // 4, k=1)
        parts.append(_upsample_nearest(layers, p, h // k))
    return _conv_bn_relu(layers, layers.Concatenate(axis=-1)(parts), c, k=1)


def _combine(layers: Any, x: Tensor, skip: Tensor, c: int) -> Tensor:
    """ResUNet-a's Combine: ReLU(decoder) concat skip, then 1x1 conv + BN."""
    x = layers.Concatenate(axis=-1)([layers.ReLU()(x), skip])
    return layers.BatchNormalization()(layers.Conv2D(c, 1, use_bias=False)(x))


def build_resunet_a(tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1) -> Any:
    """ResUNet-a d6 layout: 1x1 stem, 6 ResBlock-a levels, PSP pooling bridge."""
    layers = tf.keras.layers
    inp = tf.keras.Input(shape=shape, batch_size=batch_size, name="image")
    stem = layers.Conv2D(RESA_BASE, 1)(inp)
    x = stem
    skips = []
    for level, rates in enumerate(RESA_RATES):
        c = RESA_BASE * 2**level
        if level:
            x = layers.Conv2D(c, 1, strides=2)(x)
        x = _resblock_a(layers, x, c, rates)
        skips.append((x, c, rates))
    x = _psp_pooling(layers, x, RESA_BASE * 2 ** (len(RESA_RATES) - 1))
    for skip, c, rates in reversed(skips[:-1]):
        x = _upsample_nearest(layers, x, 2)
        x = layers.BatchNormalization()(layers.Conv2D(c, 1, use_bias=False)(x))
        x = _combine(layers, x, skip, c)
        x = _resblock_a(layers, x, c, rates)
    x = _combine(layers, x, stem, RESA_BASE)
    x = _psp_pooling(layers, x, RESA_BASE)
    out = layers.Softmax(axis=-1, name="mask")(layers.Conv2D(RESA_CLASSES, 1)(x))
    return tf.keras.Model(inp, out, name="resunet_a")


# --------------------------------------------------------------------------
# A float32 Keras U-Net (the float32 streaming figures, docs/results.md)
# --------------------------------------------------------------------------


def build_keras_unet(
    tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1, up_kernel: int = 2
) -> Any:
    """The Tiny U-Net's topology in plain Keras layers (8/16/32/64 channels; Conv2D 3x3 ReLU pairs,
    MaxPool 2x2, Conv2DTranspose stride 2 of `up_kernel`, Concatenate, a 1x1 sigmoid head), for a
    float32 model: what a user exports without quantizing."""
    layers = tf.keras.layers

    def double(x: Tensor, c: int) -> Tensor:
        conv = layers.Conv2D(c, 3, padding="same", activation="relu")
        return layers.Conv2D(c, 3, padding="same", activation="relu")(conv(x))

    inp = tf.keras.Input(shape, batch_size=batch_size)
    x1 = double(inp, 8)
    x2 = double(layers.MaxPool2D()(x1), 16)
    x3 = double(layers.MaxPool2D()(x2), 32)
    y = double(layers.MaxPool2D()(x3), 64)
    for skip, c in ((x3, 32), (x2, 16), (x1, 8)):
        up = layers.Conv2DTranspose(c // 2, up_kernel, strides=2, padding="same")(y)
        y = double(layers.Concatenate()([skip, up]), c)
    return tf.keras.Model(inp, layers.Conv2D(1, 1, activation="sigmoid")(y))


def build_keras_unet_up3(
    tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1
) -> Any:
    """build_keras_unet with the decoder most U-Nets are written with (TensorFlow's segmentation
    tutorial among them): Conv2DTranspose(c, 3, strides=2, padding="same"), whose output rows
    each read two input rows."""
    return build_keras_unet(tf, shape, batch_size, up_kernel=3)


# --------------------------------------------------------------------------
# DS-CNN-S keyword spotter (ML-Perf Tiny / ARM KWS), quantized 16x8
# --------------------------------------------------------------------------

DS_CNN_FILTERS = 64
DS_CNN_BLOCKS = 4
DS_CNN_CLASSES = 12


def build_ds_cnn(tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1) -> Any:
    """DS-CNN-S: a 10x4 stride-2 convolution of 64, four depthwise-separable blocks (DW 3x3 + BN +
    ReLU, PW 1x1 64 + BN + ReLU), average pooling over the whole map and a 12-way classifier."""
    layers = tf.keras.layers
    inp = tf.keras.Input(shape=shape, batch_size=batch_size, name="mfcc")
    x = layers.Conv2D(DS_CNN_FILTERS, (10, 4), strides=2, padding="same", use_bias=False)(inp)
    x = layers.ReLU()(layers.BatchNormalization()(x))
    for _ in range(DS_CNN_BLOCKS):
        x = layers.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        x = layers.Conv2D(DS_CNN_FILTERS, 1, use_bias=False)(x)
        x = layers.ReLU()(layers.BatchNormalization()(x))
    x = layers.AveragePooling2D(pool_size=(int(x.shape[1]), int(x.shape[2])))(x)
    x = layers.Flatten()(x)
    out = layers.Softmax(name="keyword")(layers.Dense(DS_CNN_CLASSES)(x))
    return tf.keras.Model(inp, out, name="ds_cnn")


# --------------------------------------------------------------------------
# A YOLOv8n-like detector, scaled down, quantized 16x8
# --------------------------------------------------------------------------


def _conv_silu(
    layers: Any, x: Tensor, c: int, k: int = 3, s: int = 1, padding: str = "same"
) -> Tensor:
    """YOLOv8's Conv: convolution, batch norm, SiLU (x * sigmoid(x): LOGISTIC and MUL in TFLite)."""
    x = layers.BatchNormalization()(layers.Conv2D(c, k, strides=s, padding=padding)(x))
    return layers.Multiply()([x, layers.Activation("sigmoid")(x)])


def build_yolo_int16(
    tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1
) -> Any:
    """YOLOv8n's pattern at a small size: stride-2 Conv-SiLU stem and stages, a C2f-like block
    (two convolutions, their concatenation, a 1x1), SPPF (three 5x5 max pools and their
    concatenation), a nearest-neighbour 2x upsample concatenated with the stride-8 features, and
    a 1x1 head of 4 box + 1 objectness + 4 class channels."""
    layers = tf.keras.layers
    inp = tf.keras.Input(shape=shape, batch_size=batch_size, name="image")
    x = _conv_silu(layers, inp, 8, s=2)
    x = _conv_silu(layers, x, 16, s=2)
    a = _conv_silu(layers, x, 16)
    p3 = _conv_silu(layers, layers.Concatenate()([a, _conv_silu(layers, a, 16)]), 32, k=1, s=1)
    p3 = _conv_silu(layers, layers.ZeroPadding2D(1)(p3), 32, s=2, padding="valid")  # a PAD
    y = _conv_silu(layers, p3, 16, k=1)
    m1 = layers.MaxPooling2D(5, strides=1, padding="same")(y)
    m2 = layers.MaxPooling2D(5, strides=1, padding="same")(m1)
    m3 = layers.MaxPooling2D(5, strides=1, padding="same")(m2)
    y = _conv_silu(layers, layers.Concatenate()([y, m1, m2, m3]), 32, k=1)
    up = layers.Resizing(2 * y.shape[1], 2 * y.shape[2], interpolation="nearest")(y)
    y = _conv_silu(layers, layers.Concatenate()([up, x]), 16)
    return tf.keras.Model(inp, layers.Conv2D(9, 1, name="head")(y), name="yolo_int16")


# --------------------------------------------------------------------------
# MobileNetV3-style segmentation (LR-ASPP head), small
# --------------------------------------------------------------------------

MNV3_CLASSES = 4


def _hswish(layers: Any, x: Tensor) -> Tensor:
    return layers.Activation("hard_silu")(x)


def _squeeze_excite(layers: Any, x: Tensor, squeeze: int) -> Tensor:
    """MobileNetV3's SE block: global average (MEAN over H and W, keep dims), 1x1 conv + ReLU,
    1x1 conv, hard sigmoid, and a MUL broadcasting the 1x1xC gate over every pixel."""
    c = x.shape[-1]
    s = layers.GlobalAveragePooling2D(keepdims=True)(x)
    s = layers.Conv2D(squeeze, 1, activation="relu")(s)
    s = layers.Activation("hard_sigmoid")(layers.Conv2D(c, 1)(s))
    return layers.Multiply()([x, s])


def _inverted_residual(
    layers: Any, x: Tensor, expand: int, out: int, stride: int, se: bool, hswish: bool
) -> Tensor:
    """Expand 1x1, depthwise 3x3 (stride), optional SE, project 1x1; residual when shapes agree."""
    act = (lambda t: _hswish(layers, t)) if hswish else layers.ReLU()
    y = act(layers.BatchNormalization()(layers.Conv2D(expand, 1, use_bias=False)(x)))
    y = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(y)
    y = act(layers.BatchNormalization()(y))
    if se:
        y = _squeeze_excite(layers, y, max(expand // 4, 8))
    y = layers.BatchNormalization()(layers.Conv2D(out, 1, use_bias=False)(y))
    return layers.Add()([x, y]) if stride == 1 and x.shape[-1] == out else y


def build_mnv3_seg(tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1) -> Any:
    """A small MobileNetV3-style segmenter: hard-swish stem, inverted residuals with SE blocks down
    to 1/16, an LR-ASPP head (1/16 features gated by their global average, bilinear up to 1/8,
    plus a 1x1 classifier of the 1/8 features) and a bilinear up-sampling to the input's size."""
    layers = tf.keras.layers
    inp = tf.keras.Input(shape=shape, batch_size=batch_size, name="image")
    x = _hswish(
        layers,
        layers.BatchNormalization()(
            layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inp)
        ),
    )
    x = _inverted_residual(layers, x, 16, 16, 2, True, False)  # 1/4
    x = _inverted_residual(layers, x, 48, 24, 2, False, False)  # 1/8
    low = _inverted_residual(layers, x, 72, 24, 1, False, False)
    x = _inverted_residual(layers, low, 96, 40, 2, True, True)  # 1/16
    x = _inverted_residual(layers, x, 120, 40, 1, True, True)
    h, w = low.shape[1], low.shape[2]
    high = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(64, 1, use_bias=False)(x)))
    gate = layers.GlobalAveragePooling2D(keepdims=True)(x)
    gate = layers.Activation("sigmoid")(layers.Conv2D(64, 1)(gate))
    high = layers.Resizing(h, w, interpolation="bilinear")(layers.Multiply()([high, gate]))
    y = layers.Add()([layers.Conv2D(MNV3_CLASSES, 1)(high), layers.Conv2D(MNV3_CLASSES, 1)(low)])
    y = layers.Resizing(shape[0], shape[1], interpolation="bilinear", name="mask")(y)
    return tf.keras.Model(inp, y, name="mnv3_seg")


# --------------------------------------------------------------------------
# msf-CNN's evaluation networks (classifiers)
# --------------------------------------------------------------------------


def build_mbv2_w035(tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1) -> Any:
    """MobileNetV2-w0.35-r144: Keras' own MobileNetV2 (alpha 0.35, 1000 classes, with its top),
    ending in logits as the MCUNet classifiers do: the int8 SOFTMAX over 1000 classes aborts the
    tflite-micro wheel that checks written models (a 10-class one runs). msf-CNN's layer list (analysis_optimization.py, below) writes the same network with
    unrounded widths (int(32 * 0.35) = 11 where Keras rounds to 16) and a 448-channel last conv
    (Keras keeps 1280 for alpha < 1), so its MAC count is not this file's."""
    inp = tf.keras.Input(shape=shape, batch_size=batch_size, name="image")
    return tf.keras.applications.MobileNetV2(
        alpha=0.35,
        input_tensor=inp,
        weights=None,
        classes=1000,
        include_top=True,
        classifier_activation=None,
    )


# TensorFlow's image-segmentation tutorial (tensorflow/docs site/en/tutorials/images/segmentation.ipynb):
# the MobileNetV2 activations it takes as skips, and the pix2pix decoder's filters.
SEG_TUTORIAL_SKIPS = (
    "block_1_expand_relu",  # 64x64
    "block_3_expand_relu",  # 32x32
    "block_6_expand_relu",  # 16x16
    "block_13_expand_relu",  # 8x8
    "block_16_project",  # 4x4
)
SEG_TUTORIAL_UP = (512, 256, 128, 64)
SEG_TUTORIAL_CLASSES = 3


def build_seg_tutorial(
    tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1
) -> Any:
    """TensorFlow's image-segmentation tutorial model: Keras' MobileNetV2 (alpha 1.0, no top,
    random weights here) as the encoder, five of its activations as skips, the pix2pix decoder
    (pix2pix.upsample: Conv2DTranspose(f, 3, strides=2, padding="same", no bias), batch norm,
    ReLU; its dropout is off at inference) concatenated with each skip, and a
    Conv2DTranspose(3, 3, strides=2, padding="same") to the three classes' logits."""
    layers = tf.keras.layers
    base = tf.keras.applications.MobileNetV2(input_shape=shape, include_top=False, weights=None)
    down = tf.keras.Model(base.input, [base.get_layer(n).output for n in SEG_TUTORIAL_SKIPS])
    inp = tf.keras.Input(shape=shape, batch_size=batch_size)
    *skips, x = down(inp)
    for filters, skip in zip(SEG_TUTORIAL_UP, reversed(skips)):
        x = layers.Conv2DTranspose(filters, 3, strides=2, padding="same", use_bias=False)(x)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        x = layers.Concatenate()([x, skip])
    out = layers.Conv2DTranspose(SEG_TUTORIAL_CLASSES, 3, strides=2, padding="same")(x)
    return tf.keras.Model(inp, out, name="seg_tutorial")


# (output channels, expand ratio, stride, kernel) of each MobileInvertedResidual block after the
# first (expand 1, 3x3, 8 channels). From TinyPART/msf-CNN analysis_optimization.py
# (mcunetv2_vww_5fps, MCUNet_320KB_ImageNet; commit 9632d3e95dab4998b1420b9595a86a6334452f19),
# MBConv(in, out, expansion, stride, padding, kernel_size). The JSON net configs the
# mit-han-lab/mcunet model zoo reads (mcunet/model_zoo.py, commit 9c164f84) are downloaded from
# hanlab18.mit.edu and are not in that repository.
MCUNETV2_VWW_5FPS = (
    (16, 6, 2, 3), (16, 3, 1, 3), (16, 3, 1, 3), (24, 3, 2, 7), (24, 6, 1, 3), (24, 5, 1, 5),
    (40, 6, 2, 7), (40, 6, 1, 7), (48, 6, 1, 3), (48, 4, 1, 3), (96, 5, 2, 5), (96, 5, 1, 3),
    (96, 4, 1, 3), (160, 3, 1, 7),
)  # fmt: skip
MCUNET_320KB_IMAGENET = (
    (16, 3, 2, 7), (16, 5, 1, 3), (16, 5, 1, 7), (16, 4, 1, 5), (24, 5, 2, 5), (24, 5, 1, 5),
    (24, 5, 1, 5), (40, 5, 2, 3), (40, 6, 1, 7), (40, 4, 1, 5), (48, 5, 1, 5), (48, 5, 1, 7),
    (48, 5, 1, 3), (96, 6, 2, 3), (96, 5, 1, 7), (96, 4, 1, 3), (160, 5, 1, 7),
)  # fmt: skip


def _conv_bn(layers: Any, x: Tensor, c: int, k: int = 1, s: int = 1, relu6: bool = True) -> Tensor:
    x = layers.BatchNormalization()(layers.Conv2D(c, k, s, padding="same", use_bias=False)(x))
    return layers.ReLU(6.0)(x) if relu6 else x


def _mb_block(layers: Any, x: Tensor, out: int, expand: int, stride: int, k: int) -> Tensor:
    """mcunet's MobileInvertedResidualBlock: 1x1 expand (absent at ratio 1), kxk depthwise, linear
    1x1 project, all with BN and ReLU6; the identity shortcut when stride is 1 and the channels
    agree (mcunet/tinynas/elastic_nn/networks/ofa_proxyless.py)."""
    c = x.shape[-1]
    y = _conv_bn(layers, x, c * expand) if expand != 1 else x
    y = layers.DepthwiseConv2D(k, stride, padding="same", use_bias=False)(y)
    y = _conv_bn(layers, layers.ReLU(6.0)(layers.BatchNormalization()(y)), out, relu6=False)
    return layers.Add()([x, y]) if stride == 1 and c == out else y


def _mcunet(
    tf: ModuleType,
    shape: tuple[int, int, int],
    batch_size: int | None,
    blocks: Sequence[tuple[int, int, int, int]],
    classes: int,
    name: str,
) -> Any:
    """ProxylessNASNets as mcunet builds it: 3x3 stride-2 first conv (16), the blocks, no
    feature-mix layer (none in msf-CNN's lists), global average pool, linear classifier."""
    layers = tf.keras.layers
    inp = tf.keras.Input(shape=shape, batch_size=batch_size, name="image")
    x = _mb_block(layers, _conv_bn(layers, inp, 16, 3, 2), 8, 1, 1, 3)
    for out, expand, stride, k in blocks:
        x = _mb_block(layers, x, out, expand, stride, k)
    x = layers.Dense(classes, name="logits")(layers.GlobalAveragePooling2D()(x))
    return tf.keras.Model(inp, x, name=name)


def build_mcunetv2_vww(
    tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1
) -> Any:
    """MCUNetV2-vww-5fps-r80: 15 blocks, 2 classes (person / no person)."""
    return _mcunet(tf, shape, batch_size, MCUNETV2_VWW_5FPS, 2, "mcunetv2_vww_5fps")


def build_mcunet_320kb(
    tf: ModuleType, shape: tuple[int, int, int], batch_size: int | None = 1
) -> Any:
    """MCUNet-320KB-ImageNet-r176: 18 blocks, 1000 classes."""
    return _mcunet(tf, shape, batch_size, MCUNET_320KB_IMAGENET, 1000, "mcunet_320kb_imagenet")


def _float32(name: str, shape: tuple[int, int, int], build: Callable[..., Any]) -> ModelSpec:
    """A model converted without quantization (no calibration), not in --all."""
    return ModelSpec(name, shape, build, 0, quantization="float32", in_all=False)


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        ModelSpec("tiny_unet", (80, 120, 3), build_tiny_unet, 32, expected_params=109_725),
        ModelSpec("vnet2d", (128, 128, 1), build_vnet2d, 16),
        ModelSpec("attention_unet", (160, 160, 3), build_attention_unet, 16),
        ModelSpec("resunet_a", (256, 256, 3), build_resunet_a, 8),
        _float32("keras_unet_float", (80, 120, 3), build_keras_unet),
        ModelSpec("keras_unet_up3", (80, 120, 3), build_keras_unet_up3, 16, in_all=False),
        _float32("keras_unet_up3_float", (80, 120, 3), build_keras_unet_up3),
        ModelSpec("seg_tutorial", (128, 128, 3), build_seg_tutorial, 16, in_all=False),
        ModelSpec("ds_cnn_int16", (49, 10, 1), build_ds_cnn, 32, quantization="16x8", in_all=False),
        ModelSpec(
            "yolo_int16", (96, 96, 3), build_yolo_int16, 16, quantization="16x8", in_all=False
        ),
        ModelSpec("mnv3_seg", (96, 96, 3), build_mnv3_seg, 16),
        ModelSpec("mbv2_w035_r144", (144, 144, 3), build_mbv2_w035, 16, in_all=False),
        ModelSpec("mcunetv2_vww_r80", (80, 80, 3), build_mcunetv2_vww, 16, in_all=False),
        ModelSpec("mcunet_320kb_r176", (176, 176, 3), build_mcunet_320kb, 16, in_all=False),
        _float32("mnv3_seg_float", (96, 96, 3), build_mnv3_seg),
    )
}
DEFAULT_MODELS = ("tiny_unet",)


# --------------------------------------------------------------------------
# Weights, calibration, conversion
# --------------------------------------------------------------------------


def randomize_batchnorm(tf: ModuleType, model: Any, rng: np.random.Generator) -> None:
    """Give every BN layer non-degenerate statistics.

    With no training data the defaults (gamma 1, beta 0, mean 0, var 1) make
    BN an identity; random values make the folded conv weights and the
    activation ranges look like a trained model's instead.
    """
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            (c,) = layer.gamma.shape
            layer.set_weights(
                [
                    rng.uniform(0.5, 1.5, c).astype(np.float32),  # gamma
                    rng.normal(0.0, 0.1, c).astype(np.float32),  # beta
                    rng.normal(0.0, 0.1, c).astype(np.float32),  # moving mean
                    rng.uniform(0.5, 2.0, c).astype(np.float32),  # moving variance
                ]
            )


def calibration_data(
    shape: tuple[int, int, int], count: int, seed: int
) -> Iterator[list[np.ndarray]]:
    """Seeded images in [0, 1): the converter's representative dataset."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield [rng.random((1, *shape), dtype=np.float32)]


@contextlib.contextmanager
def _quiet_fds() -> Iterator[None]:
    """Send fds 1 and 2 to a temp file while converting.

    The converter prints the exported signature (Python) and quantizer notes
    (C++) on every run; they are noise unless the conversion fails, in which
    case the tail of the log is replayed on stderr.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        ok = False
        try:
            yield
            ok = True
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            if not ok:
                log.seek(0)
                sys.stderr.write(log.read()[-4000:].decode(errors="replace"))


def convert_int8(tf: ModuleType, model: Any, spec: ModelSpec, seed: int) -> bytes:
    """Full-integer quantization: int8 inside, uint8 input and output."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: calibration_data(
        spec.input_shape, spec.calibration_samples, seed
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.uint8
    converter.inference_output_type = tf.uint8
    with _quiet_fds():
        return converter.convert()


def convert_float32(tf: ModuleType, model: Any) -> bytes:
    """No quantization: float32 inside, input and output."""
    with _quiet_fds():
        return tf.lite.TFLiteConverter.from_keras_model(model).convert()


def convert_16x8(tf: ModuleType, model: Any, spec: ModelSpec, seed: int) -> bytes:
    """TFLite's 16x8 quantization: int16 activations (input and output too), int8 weights, int64
    biases."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: calibration_data(
        spec.input_shape, spec.calibration_samples, seed
    )
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
    ]
    converter.inference_input_type = tf.int16
    converter.inference_output_type = tf.int16
    with _quiet_fds():
        return converter.convert()


def op_histogram(model_bytes: bytes) -> dict[str, int]:
    """Builtin op name -> count, read from the flatbuffer (all subgraphs)."""
    from tensorflow.lite.python import schema_py_generated as schema

    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    m = schema.Model.GetRootAs(model_bytes, 0)
    codes = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        codes.append(names.get(code, f"CUSTOM:{oc.CustomCode()!r}"))
    counts: dict[str, int] = {}
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for o in range(sg.OperatorsLength()):
            name = codes[sg.Operators(o).OpcodeIndex()]
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def build_one(
    tf: ModuleType, spec: ModelSpec, out_dir: Path, seed: int, batch_size: int | None = 1
) -> BuildResult:
    """Build, check, convert and write one model; deterministic for a given seed. With
    ``batch_size`` None the batch is left unset, as Keras exports usually are (the converter then
    writes shape_signature -1 in the batch and computes TRANSPOSE_CONV's output shape at run time):
    the file is <name>_batch_unset.tflite."""
    t0 = time.monotonic()
    tf.keras.backend.clear_session()
    tf.keras.utils.set_random_seed(seed)
    model = spec.build(tf, spec.input_shape, batch_size)
    params = model.count_params()
    if spec.expected_params is not None and params != spec.expected_params:
        raise RuntimeError(f"{spec.name}: {params} parameters, expected {spec.expected_params}")
    randomize_batchnorm(tf, model, np.random.default_rng(seed))
    if spec.quantization == "float32":
        data = convert_float32(tf, model)
    else:
        data = (convert_16x8 if spec.quantization == "16x8" else convert_int8)(
            tf, model, spec, seed
        )
    path = out_dir / (
        f"{spec.name}.tflite" if batch_size == 1 else f"{spec.name}_batch_unset.tflite"
    )
    path.write_bytes(data)
    return BuildResult(
        name=spec.name,
        path=path,
        params=params,
        size=len(data),
        seconds=time.monotonic() - t0,
        sha256=hashlib.sha256(data).hexdigest(),
        ops=op_histogram(data),
    )


# --------------------------------------------------------------------------
# Optional check in the real TFLM interpreter
# --------------------------------------------------------------------------

_MEASURE_SNIPPET = """
import sys
import numpy as np
from tflite_micro.python.tflite_micro import runtime
it = runtime.Interpreter.from_bytes(open(sys.argv[1], 'rb').read(), arena_size=int(sys.argv[2]))
d = it.get_input_details(0)
it.set_input(np.zeros(d['shape'], dtype=d['dtype']), 0)
it.invoke()
it.print_allocations()
"""


_ARENA_LINE = re.compile(r"Arena allocation (head|total) (\d+) bytes")


@dataclasses.dataclass(frozen=True)
class ArenaFigures:
    """Arena use reported by TFLM's own print_allocations()."""

    head: int
    total: int


def measure_arena(path: Path, arena_size: int) -> ArenaFigures:
    """Run the model once in the tflite_micro interpreter, in a child process.

    print_allocations() writes through TFLM's MicroPrintf (C stdio, stderr
    in the PyPI build), which Python cannot capture in-process; a child
    process with pipes for both streams sees all of it.
    """
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE_SNIPPET, str(path), str(arena_size)],
        capture_output=True,
        text=True,
        check=False,
    )
    figures = {k: int(v) for k, v in _ARENA_LINE.findall(proc.stdout + proc.stderr)}
    if proc.returncode != 0 or set(figures) != {"head", "total"}:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{path.name}: TFLM run failed: {last}")
    return ArenaFigures(head=figures["head"], total=figures["total"])


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def _import_tensorflow() -> ModuleType | None:
    """Import TensorFlow quietly, or return None if it is not installed."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf: ModuleType | None = None
    with _quiet_fds():  # TF logs oneDNN notes on import, whatever the log level
        try:
            import tensorflow as tf
        except ImportError:
            pass
    if tf is None:
        return None
    tf.get_logger().setLevel("ERROR")
    return tf


def _keras_version() -> str:
    try:
        from importlib.metadata import version

        return version("keras")
    except Exception:  # pragma: no cover - keras ships with TensorFlow
        return "unknown"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Build TinySeg's example models as .tflite files: int8; keras_unet_float as "
        "float32, ds_cnn_int16 and yolo_int16 as 16x8."
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="output directory (default: the directory of this script)",
    )
    p.add_argument(
        "--models",
        default=",".join(DEFAULT_MODELS),
        help=f"comma-separated subset of: {','.join(MODELS)} (default: %(default)s)",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help=f"build the int8 models ({','.join(n for n, s in MODELS.items() if s.in_all)})",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="run each model once in the tflite_micro interpreter and print its arena use",
    )
    p.add_argument(
        "--arena-size",
        type=int,
        default=64 << 20,
        help="arena size in bytes for --measure (default: 64 MiB)",
    )
    p.add_argument(
        "--batch-unset",
        action="store_true",
        help="leave the batch unset, as a usual Keras export does; writes <name>_batch_unset.tflite",
    )
    p.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = (
        [n for n, s in MODELS.items() if s.in_all]
        if args.all
        else [n.strip() for n in args.models.split(",") if n.strip()]
    )
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        print(
            f"build.py: error: unknown model(s) {','.join(unknown) or '(none given)'}; "
            f"choose from {','.join(MODELS)}",
            file=sys.stderr,
        )
        return 2
    tf = _import_tensorflow() if np is not None else None
    if tf is None:
        print(
            f"build.py: error: TensorFlow is not installed; run: {INSTALL_HINT}",
            file=sys.stderr,
        )
        return 2
    versions = {"tensorflow": tf.__version__, "keras": _keras_version()}
    if versions != PINNED:
        have = ", ".join(f"{k} {v}" for k, v in versions.items())
        want = ", ".join(f"{k} {v}" for k, v in PINNED.items())
        print(
            f"build.py: note: {have} is not the pinned {want}: the files will not be byte-identical to the "
            f"committed tiny_unet.tflite (install: {INSTALL_HINT})",
            file=sys.stderr,
        )
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"build.py: error: cannot create {args.out}: {e.strerror}", file=sys.stderr)
        return 2
    for name in names:
        try:
            r = build_one(tf, MODELS[name], args.out, args.seed, None if args.batch_unset else 1)
        except (RuntimeError, OSError) as e:
            print(f"build.py: error: {e}", file=sys.stderr)
            return 1
        ops = " ".join(f"{k}x{v}" for k, v in r.ops.items())
        print(
            f"{r.name}: {r.path} params={r.params} size={r.size} "
            f"time={r.seconds:.1f}s sha256={r.sha256[:16]} ops: {ops}",
            flush=True,
        )
        if args.measure:
            try:
                a = measure_arena(r.path, args.arena_size)
            except RuntimeError as e:
                print(f"build.py: error: {e}", file=sys.stderr)
                return 1
            print(f"{r.name}: TFLM arena head={a.head} total={a.total}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
