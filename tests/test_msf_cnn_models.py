"""msf-CNN's three evaluation networks as examples/models/build.py builds them: the published
shapes (input size, MobileInvertedResidual blocks, the overall stride of 32, the last block's
channels, the classes), and benchmarks/msf_cnn_table.py's MAC count of a streamed model."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from conftest import TINY_UNET

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "models"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _load_build():
    """examples/models/build.py under its own name: another test may already have imported an
    unrelated module called ``build`` (examples/host_stream/build.py) into this process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "models_build", ROOT / "examples" / "models" / "build.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["models_build"] = module
    spec.loader.exec_module(module)
    return module


build = _load_build()
import msf_cnn_table  # noqa: E402  (benchmarks/msf_cnn_table.py)

from tinyseg_plugin import pipeline  # noqa: E402
from tinyseg_plugin.memory.cost import op_macs  # noqa: E402
from tinyseg_plugin.transforms.optimizer import Options  # noqa: E402

# name: (input, blocks, channels into the pool, classes)
PUBLISHED = {
    "mbv2_w035_r144": ((144, 144, 3), 17, 1280, 1000),
    "mcunetv2_vww_r80": ((80, 80, 3), 15, 160, 2),
    "mcunet_320kb_r176": ((176, 176, 3), 18, 160, 1000),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_builders_give_the_published_shapes(name: str) -> None:
    tf = pytest.importorskip("tensorflow")
    shape, blocks, channels, classes = PUBLISHED[name]
    spec = build.MODELS[name]
    tf.keras.backend.clear_session()
    model = spec.build(tf, spec.input_shape, None)
    assert spec.input_shape == shape and tuple(model.inputs[0].shape) == (None, *shape)
    layers = model.layers
    depthwise = [la for la in layers if isinstance(la, tf.keras.layers.DepthwiseConv2D)]
    assert len(depthwise) == blocks
    pool_layer = tf.keras.layers.GlobalAveragePooling2D
    pool = next(i for i, la in enumerate(layers) if isinstance(la, pool_layer))
    side = math.ceil(shape[0] / 32)
    assert tuple(layers[pool - 1].output.shape) == (None, side, side, channels)
    assert tuple(model.outputs[0].shape) == (None, classes)


def test_streamed_macs_are_the_originals() -> None:
    """The table's count over StreamChain stages gives the original's MACs for the Tiny U-Net
    written with --stream-io (every row computed once) and for the original itself."""
    data = TINY_UNET.read_bytes()
    graph = pipeline.load(data, TINY_UNET.name)
    run = pipeline.Run(Options(stream_io=True), runs=None)
    run.nearby = False
    written = pipeline.load(pipeline.optimize(data, run, TINY_UNET.name, graph).data, "out")
    assert any(op.opcode == "StreamChain" for op in written.operators)
    assert msf_cnn_table.graph_macs(written) == sum(op_macs(graph))
    assert msf_cnn_table.graph_macs(graph) == sum(op_macs(graph))
