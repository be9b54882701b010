"""Two float32 models for the float32 streaming figures (docs/results.md), built with TensorFlow
and converted without quantization; random weights (memory depends on shapes only).

- keras_unet_float.tflite: the Tiny U-Net's topology (80x120x3; 8/16/32/64 channels; Conv2D 3x3
  ReLU pairs, MaxPool 2x2, Conv2DTranspose 2x2 stride 2, Concatenate, a 1x1 sigmoid head).
- fomo_mnv2_035_96_float.tflite: a FOMO-style detector, MobileNetV2 alpha 0.35 at 96x96 cut at
  block_6_expand_relu, a 1x1 conv of 32 and a 1x1 softmax of 2 classes.

Run: python benchmarks/float_models.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path


def keras_unet(tf):
    """The float32 Keras U-Net (examples/models/build.py's keras_unet_float)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "models"))
    from build import build_keras_unet

    return build_keras_unet(tf, (80, 120, 3))


def fomo(tf):
    """The float32 FOMO-style MobileNetV2 detector."""
    base = tf.keras.applications.MobileNetV2(
        input_shape=(96, 96, 3), alpha=0.35, include_top=False, weights=None
    )
    x = base.get_layer("block_6_expand_relu").output
    x = tf.keras.layers.Conv2D(32, 1, activation="relu")(x)
    return tf.keras.Model(base.input, tf.keras.layers.Conv2D(2, 1, activation="softmax")(x))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python benchmarks/float_models.py OUT_DIR", file=sys.stderr)
        return 2
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name, build in (("keras_unet_float", keras_unet), ("fomo_mnv2_035_96_float", fomo)):
        data = tf.lite.TFLiteConverter.from_keras_model(build(tf)).convert()
        (out / f"{name}.tflite").write_bytes(data)
        print(out / f"{name}.tflite")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
