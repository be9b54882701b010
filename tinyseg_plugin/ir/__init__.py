"""The model: the .tflite file read and written, the graph view over it, the checks a model must
pass before anything plans, rewrites or runs it. Imports contract/ (TinySeg's operators by name)."""
