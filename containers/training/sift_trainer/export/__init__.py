"""From a trained or imported GLiNER2 checkpoint to the files the TS engine serves (ONNX fragments, int8, scorer)."""
