"""Memory: the arena plan as TFLM commits it, the scratch and persistent rules of each kernel
set, the cold ranges, the analysis. Imports ir/ and contract/."""
