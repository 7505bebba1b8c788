"""int8 variant of an exported encoder (research/gliner2.md §5.2): dynamic quantization of
``onnx/encoder.onnx`` (MatMul/Gemm weights to int8, activations quantized at run time) into
``onnx/encoder.int8.onnx``. The small head graphs stay fp32. The TS engine serves the int8 encoder
when ``SIFT_ENCODER_PRECISION=int8`` and the file exists.

usage: python -m sift_trainer.export.quantize_onnx MODEL_DIR [--per-tensor]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def quantize(model_dir: Path, per_channel: bool = True) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx_dir = Path(model_dir) / "onnx"
    src = onnx_dir / "encoder.onnx"
    dst = onnx_dir / "encoder.int8.onnx"
    t0 = time.time()
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=per_channel,
                     op_types_to_quantize=["MatMul", "Gemm"])
    cfg_path = onnx_dir / "gliner2_config.json"
    if cfg_path.exists():
        cfg = json.loads(cfg_path.read_text())
        cfg.setdefault("files", {})["encoder_int8"] = {
            "file": "encoder.int8.onnx", "quantization": "dynamic int8 (MatMul/Gemm weights)",
            "per_channel": per_channel, "seconds": round(time.time() - t0, 2),
        }
        cfg_path.write_text(json.dumps(cfg, indent=2))
    return dst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--per-tensor", action="store_true", help="one scale per tensor (default: per channel, closer to fp32)")
    a = ap.parse_args()
    out = quantize(Path(a.model_dir), per_channel=not a.per_tensor)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
