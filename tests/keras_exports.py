#!/usr/bin/env python3
"""Keras exports as users make them, for tests/test_static_shapes.py: each network twice, with the
batch left unset (Keras' default: shape_signature -1 in the batch, shapes computed at run time by
SHAPE -> STRIDED_SLICE -> PACK) and with batch_size=1, int8 full-integer quantized by
TFLiteConverter with a representative dataset.

  tiny_unet[_batch_unset].tflite  the paper's Tiny U-Net (examples/models/build.py): TRANSPOSE_CONV
  reshape[_batch_unset].tflite    Conv2D -> Reshape -> Conv2DTranspose -> Reshape twice -> Conv2D:
                                  RESHAPE and TRANSPOSE_CONV, and a RESHAPE only SHAPE reads

Usage: python tests/keras_exports.py OUT_DIR (about 15 s; needs TensorFlow: make models-deps)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "models"))

import build  # noqa: E402  (examples/models/build.py)

RESHAPE_INPUT = (8, 8, 4)


def build_reshape_net(tf, shape, batch_size):
    """Reshapes around a Conv2DTranspose: the converter computes each target shape at run time
    when the batch is unset."""
    layers = tf.keras.layers
    inp = tf.keras.Input(shape=shape, batch_size=batch_size, name="image")
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = layers.Reshape((4, 16, 8))(x)
    x = layers.Conv2DTranspose(4, 2, strides=2)(x)
    x = layers.Reshape((8 * 32, 4))(x)
    x = layers.Reshape((8, 32, 4))(x)
    return tf.keras.Model(inp, layers.Conv2D(2, 1)(x), name="reshape")


def main(out: Path) -> int:
    tf = build._import_tensorflow()
    if tf is None:
        print(
            f"keras_exports.py: TensorFlow is not installed ({build.INSTALL_HINT})", file=sys.stderr
        )
        return 2
    out.mkdir(parents=True, exist_ok=True)
    specs = (
        build.MODELS["tiny_unet"],
        build.ModelSpec("reshape", RESHAPE_INPUT, build_reshape_net, calibration_samples=8),
    )
    for spec in specs:
        for batch in (1, None):
            build.build_one(tf, spec, out, build.SEED, batch)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
