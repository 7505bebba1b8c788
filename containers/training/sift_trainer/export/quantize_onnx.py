"""int8 variant of an exported encoder (research/gliner2.md §5.2): ``onnx/encoder.onnx`` → ONNX Runtime's
graph optimizations (``quant_pre_process``: shape inference, constant folding, fusions) → dynamic
quantization of the MatMul weights only (int8, one scale per output channel; activations quantized at
run time) → ``onnx/encoder.int8.onnx``. The head graphs (span scores, count, classifier) stay fp32. The
TS engine serves the int8 encoder when ``SIFT_ENCODER_PRECISION=int8`` and the file exists.


Measured on the mini model (wnut17 test, 1287 texts; docs/experiments/encoder.md "Speed"): this recipe loses no F1
(14.14 → 14.14); with ``reduce_range`` (7-bit weights, ONNX Runtime's advice against U8S8 saturation
on AVX2 without VNNI) it lost 0.92 points here, so it is off unless asked for.

usage: python -m sift_trainer.export.quantize_onnx MODEL_DIR [--per-tensor] [--reduce-range]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def quantize(model_dir: Path, per_channel: bool = True, reduce_range: bool = False) -> Path:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    onnx_dir = Path(model_dir) / "onnx"
    src = onnx_dir / "encoder.onnx"
    dst = onnx_dir / "encoder.int8.onnx"
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "encoder.pre.onnx"
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
        quantize_dynamic(
            str(pre),
            str(dst),
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            reduce_range=reduce_range,
            op_types_to_quantize=["MatMul"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    cfg_path = onnx_dir / "gliner2_config.json"
    if cfg_path.exists():
        cfg = json.loads(cfg_path.read_text())
        cfg.setdefault("files", {})["encoder_int8"] = {
            "file": "encoder.int8.onnx",
            "quantization": "dynamic int8 MatMul weights after ORT graph optimization",
            "per_channel": per_channel,
            "reduce_range": reduce_range,
            "seconds": round(time.time() - t0, 2),
        }
        cfg_path.write_text(json.dumps(cfg, indent=2))
    return dst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument(
        "--per-tensor", action="store_true", help="one scale per tensor (default: per channel, closer to fp32)"
    )
    ap.add_argument(
        "--reduce-range", action="store_true", help="7-bit weights (see the module doc: worse F1 on the mini model)"
    )
    a = ap.parse_args()
    out = quantize(Path(a.model_dir), per_channel=not a.per_tensor, reduce_range=a.reduce_range)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
