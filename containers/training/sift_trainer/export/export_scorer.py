"""Span-scoring fragments for the TS engine: span representation → label scores → sigmoid in one
graph (gliner2 2.x ``SpanMarkerV0.score_queries``, factorized). Instead of materializing
``span_rep [L, W, D]`` (an out_project MLP per span) and scoring it on the host, the first
out_project layer is split into start/end halves applied once per word and the last layer is folded
into the query vectors:

    score(q, i, w) = sigmoid(relu(S[i] + E[i+w]) . (q @ W2) + q . b2)
    S = relu(project_start(h)) @ W1[:, :D]^T + b1,  E = relu(project_end(h)) @ W1[:, D:]^T

Graphs written next to the other fragments in ``<model>/onnx/``:

| file                | inputs                                           | outputs                               |
|---------------------|--------------------------------------------------|---------------------------------------|
| span_scores.onnx    | word_embs f32 [B, L, D], queries f32 [B, Q, D]   | scores f32 [B, Q, L, W] (probabilities) |
| count_embed_c1.onnx | field_embs f32 [M, D]                            | struct_proj f32 [1, M, D] (= count_embed.onnx[:1]; entities and C = 1 need only slot 0) |

Spans past a row's last word (i + w ≥ L) hold scores of zero-padded words: the host ignores them.
Verified against ``sigmoid(span_rep . query)`` on a padded batch (max abs diff recorded in
gliner2_config.json under ``scorer``). ``export_onnx.export_fragments`` calls this, so every export
(the mini build, training jobs, imports) has them.

usage: python -m sift_trainer.export.export_scorer MODEL_DIR   (adds them to an older export)
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

OPSET = 17
SCORER_FILES = ("span_scores.onnx", "count_embed_c1.onnx")


class _SpanScores(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.W = int(layer.max_width)
        D = layer.project_start[0].in_features
        first, final = layer.out_project[0], layer.out_project[3]
        self.register_buffer("w_start", first.weight[:, :D].detach().clone())
        self.register_buffer("w_end", first.weight[:, D:].detach().clone())
        self.register_buffer(
            "b1", (first.bias if first.bias is not None else torch.zeros(first.out_features)).detach().clone()
        )
        self.register_buffer("w2", final.weight.detach().clone())  # [D, 4D]
        self.register_buffer(
            "b2", (final.bias if final.bias is not None else torch.zeros(final.out_features)).detach().clone()
        )

    def forward(self, word_embs, queries):
        L = word_embs.shape[1]
        s = F.linear(self.layer.project_start(word_embs).relu(), self.w_start) + self.b1  # [B, L, 4D]
        e = F.linear(self.layer.project_end(word_embs).relu(), self.w_end)  # [B, L, 4D]
        e = F.pad(e, (0, 0, 0, self.W - 1))  # rows past the end: zeros (ignored by the host)
        qh = (queries @ self.w2).transpose(1, 2)  # [B, 4D, Q]
        qb = (queries @ self.b2).unsqueeze(1)  # [B, 1, Q]
        # one width at a time: [B, L, 4D] live instead of [B, L, W, 4D]
        per_w = [torch.relu(s + e[:, w : w + L]) @ qh + qb for w in range(self.W)]  # W × [B, L, Q]
        return torch.sigmoid(torch.stack(per_w, dim=3).transpose(1, 2))  # [B, Q, L, W]


class _C1(nn.Module):
    def __init__(self, ce):
        super().__init__()
        from .export_onnx import exportable_count_embed

        self.ce = exportable_count_embed(ce)

    def forward(self, field_embs):
        return self.ce(field_embs, 1)


def export_scorer(model, model_dir: Path) -> dict:
    import onnxruntime as ort

    onnx_dir = Path(model_dir) / "onnx"
    layer = model.span_rep.span_rep_layer.float().cpu().eval()
    D = layer.project_start[0].in_features
    W = int(layer.max_width)
    g = torch.Generator().manual_seed(0)
    scorer = _SpanScores(layer).eval()
    c1 = _C1(model.count_embed.float().cpu().eval()).eval()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    with torch.no_grad():
        torch.onnx.export(
            scorer,
            (torch.randn(2, 5, D, generator=g), torch.randn(2, 3, D, generator=g)),
            str(onnx_dir / "span_scores.onnx"),
            input_names=["word_embs", "queries"],
            output_names=["scores"],
            dynamic_axes={
                "word_embs": {0: "batch", 1: "words"},
                "queries": {0: "batch", 1: "queries"},
                "scores": {0: "batch", 1: "queries", 2: "words"},
            },
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
        torch.onnx.export(
            c1,
            (torch.randn(3, D, generator=g),),
            str(onnx_dir / "count_embed_c1.onnx"),
            input_names=["field_embs"],
            output_names=["struct_proj"],
            dynamic_axes={"field_embs": {0: "fields"}, "struct_proj": {1: "fields"}},
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
        # verify on a batch of 2 rows of different lengths and counts: == sigmoid(span_rep . q) on valid spans
        L, B, Q = 9, 2, 4
        h = torch.randn(B, L, D, generator=g)
        q = torch.randn(B, Q, D, generator=g)
        got = ort.InferenceSession(str(onnx_dir / "span_scores.onnx"), so, providers=["CPUExecutionProvider"]).run(
            None, {"word_embs": h.numpy(), "queries": q.numpy()}
        )[0]
        worst = 0.0
        for b, n in ((0, L), (1, L - 3)):
            starts = torch.arange(n).unsqueeze(1).expand(n, W)
            ends = starts + torch.arange(W).unsqueeze(0)
            valid = ends < n
            si = torch.stack(
                [torch.where(valid, starts, 0).reshape(-1), torch.where(valid, ends, 0).reshape(-1)], -1
            ).unsqueeze(0)
            ref = torch.sigmoid(torch.einsum("lwd,qd->qlw", layer(h[b : b + 1, :n], si)[0], q[b]))
            worst = max(worst, float(np.abs(ref.numpy() - got[b, :, :n])[:, valid.numpy()].max()))
        f5 = torch.randn(5, D, generator=g)
        full = model.count_embed(f5, 20)[:1]
        got = ort.InferenceSession(str(onnx_dir / "count_embed_c1.onnx"), so, providers=["CPUExecutionProvider"]).run(
            None, {"field_embs": f5.numpy()}
        )[0]
        c1diff = float(np.abs(full.numpy() - got).max())
    if worst > 1e-4 or c1diff > 1e-4:
        raise RuntimeError(f"span_scores mismatch {worst} / count_embed_c1 {c1diff}")
    cfg_path = onnx_dir / "gliner2_config.json"
    cfg = json.loads(cfg_path.read_text())
    files = cfg.setdefault("files", {})
    for old in ("span_factors", "query_fold"):  # the previous factorized pair (scored on the host)
        files.pop(old, None)
        (onnx_dir / f"{old}.onnx").unlink(missing_ok=True)
    files["span_scores"] = {
        "file": "span_scores.onnx",
        "inputs": {"word_embs": ["batch", "words", D], "queries": ["batch", "queries", D]},
        "outputs": {"scores": ["batch", "queries", "words", W]},
    }
    files["count_embed_c1"] = {
        "file": "count_embed_c1.onnx",
        "inputs": {"field_embs": ["fields", D]},
        "outputs": {"struct_proj": [1, "fields", D]},
    }
    cfg["scorer"] = {
        "kind": "span_scores",
        "score": "sigmoid(relu(S[i] + E[i+w]) . (q @ W2) + q . b2)",
        "max_abs_score_diff": worst,
        "count_embed_c1_max_abs_diff": c1diff,
    }
    cfg_path.write_text(json.dumps(cfg, indent=2))
    return cfg["scorer"]


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    a = ap.parse_args()
    from gliner2 import GLiNER2

    model = GLiNER2.from_pretrained(a.model_dir)
    print(json.dumps(export_scorer(model, Path(a.model_dir))))


if __name__ == "__main__":
    main()
