"""ONNX export of the pooled classifier (encoder/pooled_cls.py): ``onnx/pooled_classifier.onnx`` + ``.json``.

| file                    | inputs                                                               | outputs                  |
|-------------------------|----------------------------------------------------------------------|--------------------------|
| pooled_classifier.onnx  | hidden_states f32 [batch, tokens, D], attention_mask int64 [batch, tokens] | logits f32 [batch, labels] |

``hidden_states`` is ``encoder.onnx``'s (or ``encoder.int8.onnx``'s) output run on the text alone, tokenized
with tokenizer.json's special tokens and cut at the json's ``max_tokens``; pooling is inside the graph.
Parity: PyTorch (encoder + head) against onnxruntime (encoder.onnx → this graph) on a padded batch, and the
int8 encoder's logits against fp32's (recorded, not bounded: quantization moves them), in the json; the fp32
diff also in gliner2_config.json's ``parity_max_abs_diff`` beside the other fragments'.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ..encoder.pooled_cls import PooledClassifier, tokenize
from .export_onnx import _export, _maxdiff, _ort

GRAPH = "pooled_classifier.onnx"
META = "pooled_classifier.json"
PARITY_TEXTS = ["how do i top up my card with a cheque?", "is it raining"]


def export_pooled(model, pooled: PooledClassifier, out_dir: Path, verify: bool = True) -> dict[str, Any]:
    """Writes the graph and its json into ``out_dir/onnx`` (after export_fragments: it reads encoder.onnx)."""
    onnx_dir = Path(out_dir) / "onnx"
    onnx_dir.mkdir(parents=True, exist_ok=True)
    model = model.float().cpu().eval()
    head = pooled.head.float().cpu().eval()
    D = int(model.hidden_size)
    g = torch.Generator().manual_seed(0)
    hs = torch.randn(1, 5, D, generator=g)
    _export(
        head,
        (hs, torch.ones(1, 5, dtype=torch.long)),
        onnx_dir / GRAPH,
        ["hidden_states", "attention_mask"],
        ["logits"],
        {
            "hidden_states": {0: "batch", 1: "tokens"},
            "attention_mask": {0: "batch", 1: "tokens"},
            "logits": {0: "batch"},
        },
    )
    meta = pooled.manifest()
    if verify:
        meta["parity_max_abs_diff"] = _parity(model, head, onnx_dir, pooled.max_tokens)
        if meta["parity_max_abs_diff"]["pooled_classifier"] > 1e-3:  # the int8 diff is recorded only
            raise RuntimeError(f"pooled classifier ONNX parity check failed: {meta['parity_max_abs_diff']}")
    (onnx_dir / META).write_text(json.dumps(meta, indent=2, ensure_ascii=False))
    cfg_path = onnx_dir / "gliner2_config.json"
    if cfg_path.exists() and verify:
        cfg = json.loads(cfg_path.read_text())
        # the fp32 diff only: the others there are bounded by 1e-3, and int8 is a different model
        cfg.setdefault("parity_max_abs_diff", {})["pooled_classifier"] = meta["parity_max_abs_diff"][
            "pooled_classifier"
        ]
        cfg.setdefault("files", {})["pooled_classifier"] = {
            "file": GRAPH,
            "config": META,
            "inputs": {"hidden_states": ["batch", "tokens", D], "attention_mask": ["batch", "tokens"]},
            "outputs": {"logits": ["batch", len(pooled.labels)]},
        }
        cfg_path.write_text(json.dumps(cfg, indent=2))
    return meta


def _parity(model, head, onnx_dir: Path, max_tokens: int) -> dict[str, float]:
    """Torch encoder + head vs encoder.onnx → pooled_classifier.onnx on a padded batch of two texts."""
    b = tokenize(model.processor.tokenizer, PARITY_TEXTS, max_tokens)
    ids, mask = b["input_ids"], b["attention_mask"]
    with torch.no_grad():
        ref = head(model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state, mask)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    cls = _ort(onnx_dir / GRAPH)
    out: dict[str, float] = {}
    hidden = _ort(onnx_dir / "encoder.onnx").run(None, feeds)[0]
    got = cls.run(None, {"hidden_states": hidden, "attention_mask": feeds["attention_mask"]})[0]
    out["pooled_classifier"] = _maxdiff(ref, got)
    int8 = onnx_dir / "encoder.int8.onnx"
    if int8.exists():
        hidden8 = _ort(int8).run(None, feeds)[0]
        got8 = cls.run(None, {"hidden_states": hidden8, "attention_mask": feeds["attention_mask"]})[0]
        out["pooled_classifier_int8_encoder"] = _maxdiff(ref, got8)
    return out
