"""The per-channel requantization of CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV, as TFLM's
Prepare computes it (kernel_util.cc PopulateConvolutionQuantizationParams, quantization_util.cc
QuantizeMultiplier with double rounding): computed offline, a stage's table lives in the model
(flash) instead of StreamChain's persistent block in the arena (docs/custom_ops.md, "quant")."""

from __future__ import annotations

import math
import struct

from .customops import QUANT_MULTIPLIER_LIMITS, QUANT_SHIFT_LIMITS


def _float32(x: float) -> float:
    """``x`` as the float32 the kernel holds (TfLiteQuantizationParams.scale), widened to double."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def quantize_multiplier(x: float) -> tuple[int, int]:
    """(multiplier, shift) for the real multiplier ``x``: frexp, the fraction times 2^31 rounded
    half away from zero (TfLiteRound), 2^31 folded into the shift, shifts below -31 flushed to
    (0, 0)."""
    if x == 0.0:
        return 0, 0
    q, shift = math.frexp(x)
    v = q * (1 << 31)  # exact: a power-of-two scaling
    fixed = int(math.copysign(math.floor(abs(v) + 0.5), v))
    if fixed == 1 << 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return fixed, shift


def requantization(
    input_scale: float, filter_scales: tuple[float, ...], output_scale: float, channels: int
) -> tuple[int, ...] | None:
    """multiplier[channels] then shift[channels], or None when TFLM would refuse the scales (not
    one or ``channels`` filter scales) or an entry falls outside the contract's limits (the kernel
    then computes the table in Prepare, in the arena)."""
    if len(filter_scales) not in (1, channels) or channels <= 0:
        return None
    s_in, s_out = _float32(input_scale), _float32(output_scale)
    if s_out == 0.0 or not (math.isfinite(s_in) and math.isfinite(s_out)):
        return None
    pairs = []
    for c in range(channels):
        x = s_in * _float32(filter_scales[c if len(filter_scales) > 1 else 0]) / s_out
        if not math.isfinite(x):
            return None
        pairs.append(quantize_multiplier(x))
    (m_lo, m_hi), (s_lo, s_hi) = QUANT_MULTIPLIER_LIMITS, QUANT_SHIFT_LIMITS
    if not all(m_lo <= m <= m_hi and s_lo <= s <= s_hi for m, s in pairs):
        return None
    return tuple(m for m, _ in pairs) + tuple(s for _, s in pairs)
