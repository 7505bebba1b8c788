"""Builds a small fine-tuned-decoder fixture: a PEFT LoRA on SmolLM2-135M-Instruct with seeded random
(or zero) weights, exported to llama.cpp's GGUF LoRA format by the trainer's own exporter
(containers/training/sift_trainer/decoder/gguf_lora.py). Writes, like a decoder training job's model dir:
``adapter/`` (PEFT safetensors), ``adapter.gguf`` and ``manifest.json``.

    python test/decoder/make_lora_fixture.py --base ~/.cache/sift/models/HuggingFaceTB--SmolLM2-135M-Instruct \
        --out test/.cache/lora/random --init random

``--init zero`` keeps PEFT's default initialisation (lora_B = 0), so the adapter changes nothing.
The output appears atomically (built in a temp dir, then renamed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "containers" / "training"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--init", choices=["random", "zero"], default="random")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from sift_trainer.decoder.gguf_lora import export_lora_gguf

    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_pretrained(str(args.base), dtype=torch.float32)
    cfg = LoraConfig(
        r=args.rank,
        lora_alpha=2 * args.rank,
        target_modules=TARGETS,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
        # True: PEFT's default (lora_B = 0, a no-op adapter); False: both factors keep nn.Linear's
        # seeded random init, so the adapter really changes the model.
        init_lora_weights=args.init == "zero",
    )
    peft_model = get_peft_model(model, cfg)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=args.out.name + ".", dir=args.out.parent))
    try:
        peft_model.save_pretrained(str(work / "adapter"))
        info = export_lora_gguf(work / "adapter", peft_model.get_base_model().config.to_dict(), work / "adapter.gguf")
        manifest = {
            "format": "sift-model/1",
            "family": "decoder",
            "architecture": "causal-lm-lora",
            "fixture": {"init": args.init, "rank": args.rank, "seed": args.seed},
            "files": {"adapter": "adapter/", "adapter_gguf": "adapter.gguf", "adapter_gguf_info": info},
        }
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2))
        os.chmod(work, 0o755)
        if args.out.exists():
            shutil.rmtree(args.out)
        os.rename(work, args.out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    print(json.dumps({"out": str(args.out), **info}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
