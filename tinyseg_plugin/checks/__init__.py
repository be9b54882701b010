"""Checks: the bit-exact check of an optimized model against its original in the real TFLM
interpreter, and the real-kernel runner built from a TFLM tree. Imports transforms/ (the
lowering), memory/, ir/, contract/ and deploy/ (to install TinySeg into the runner's tree)."""
