"""Factorized span-scorer fragments for the TS engine (gliner2 2.x ``SpanMarkerV0.score_queries``):
instead of materializing ``span_rep [L, W, D]`` (an out_project MLP per span), the first
out_project layer is split into start/end halves applied once per word and the last layer is folded
into the query vectors:

    logit(i, w, q) = relu(S[i] + E[i+w]) . Qf[q] + qb[q]
    S = relu(project_start(h)) @ W1[:, :D]^T + b1,  E = relu(project_end(h)) @ W1[:, D:]^T
    Qf = q @ W2,  qb = q . b2

Graphs written next to the other fragments in ``<model>/onnx/``:

| file               | inputs                     | outputs                                        |
|--------------------|----------------------------|------------------------------------------------|
| span_factors.onnx  | word_embs f32 [B, L, D]    | start_hidden f32 [B, L, 4D], end_hidden f32 [B, L, 4D] |
| query_fold.onnx    | queries f32 [Q, D]         | query_hidden f32 [Q, 4D], query_bias f32 [Q]   |
| count_embed_c1.onnx | field_embs f32 [M, D]     | struct_proj f32 [1, M, D] (= count_embed.onnx[:1]; entities and C=1 need only slot 0) |

Verified against ``span_rep . query`` on random inputs (max abs logit diff recorded in
gliner2_config.json under ``scorer``).

usage: python -m sift_trainer.export.export_scorer MODEL_DIR
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

OPSET = 17


class _Factors(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        D = layer.project_start[0].in_features
        first = layer.out_project[0]
        self.register_buffer("w_start", first.weight[:, :D].detach().clone())
        self.register_buffer("w_end", first.weight[:, D:].detach().clone())
        self.register_buffer("b1", (first.bias if first.bias is not None else torch.zeros(first.out_features)).detach().clone())

    def forward(self, word_embs):
        s = torch.nn.functional.linear(self.layer.project_start(word_embs).relu(), self.w_start) + self.b1
        e = torch.nn.functional.linear(self.layer.project_end(word_embs).relu(), self.w_end)
        return s, e


class _Fold(nn.Module):
    def __init__(self, layer):
        super().__init__()
        final = layer.out_project[3]
        self.register_buffer("w2", final.weight.detach().clone())  # [D, 4D]
        self.register_buffer("b2", (final.bias if final.bias is not None else torch.zeros(final.out_features)).detach().clone())

    def forward(self, queries):
        return queries @ self.w2, queries @ self.b2


def export_scorer(model, model_dir: Path) -> dict:
    onnx_dir = Path(model_dir) / "onnx"
    layer = model.span_rep.span_rep_layer.float().cpu().eval()
    D = layer.project_start[0].in_features
    g = torch.Generator().manual_seed(0)
    fac, fold = _Factors(layer).eval(), _Fold(layer).eval()
    with torch.no_grad():
        torch.onnx.export(fac, (torch.randn(1, 5, D, generator=g),), str(onnx_dir / "span_factors.onnx"),
                          input_names=["word_embs"], output_names=["start_hidden", "end_hidden"],
                          dynamic_axes={"word_embs": {0: "batch", 1: "words"}, "start_hidden": {0: "batch", 1: "words"}, "end_hidden": {0: "batch", 1: "words"}},
                          opset_version=OPSET, do_constant_folding=True, dynamo=False)
        torch.onnx.export(fold, (torch.randn(3, D, generator=g),), str(onnx_dir / "query_fold.onnx"),
                          input_names=["queries"], output_names=["query_hidden", "query_bias"],
                          dynamic_axes={"queries": {0: "queries"}, "query_hidden": {0: "queries"}, "query_bias": {0: "queries"}},
                          opset_version=OPSET, do_constant_folding=True, dynamo=False)
        # verify: factorized logits == span_rep . q on valid spans
        import onnxruntime as ort
        L, W = 9, layer.max_width
        h = torch.randn(1, L, D, generator=g)
        q = torch.randn(4, D, generator=g)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        s, e = ort.InferenceSession(str(onnx_dir / "span_factors.onnx"), so).run(None, {"word_embs": h.numpy()})
        qh, qb = ort.InferenceSession(str(onnx_dir / "query_fold.onnx"), so).run(None, {"queries": q.numpy()})
        starts = torch.arange(L).unsqueeze(1).expand(L, W)
        ends = starts + torch.arange(W).unsqueeze(0)
        valid = ends < L
        si = torch.stack([torch.where(valid, starts, 0).reshape(-1), torch.where(valid, ends, 0).reshape(-1)], -1).unsqueeze(0)
        ref = torch.einsum("lwd,qd->qlw", layer(h, si)[0], q)
        worst = 0.0
        s, e, qh, qb = map(torch.from_numpy, (s[0], e[0], qh, qb))
        for i in range(L):
            for w in range(W):
                if i + w < L:
                    got = (torch.relu(s[i] + e[i + w]) @ qh.T) + qb
                    worst = max(worst, float((got - ref[:, i, w]).abs().max()))
        # count embedding for one instance slot (the common case: entities read slot 0 only)
        class _C1(nn.Module):
            def __init__(self, ce):
                super().__init__()
                self.ce = ce

            def forward(self, field_embs):
                return self.ce(field_embs, 1)

        c1 = _C1(model.count_embed.float().cpu().eval()).eval()
        torch.onnx.export(c1, (torch.randn(3, D, generator=g),), str(onnx_dir / "count_embed_c1.onnx"),
                          input_names=["field_embs"], output_names=["struct_proj"],
                          dynamic_axes={"field_embs": {0: "fields"}, "struct_proj": {1: "fields"}},
                          opset_version=OPSET, do_constant_folding=True, dynamo=False)
        f5 = torch.randn(5, D, generator=g)
        full = model.count_embed(f5, 20)[:1]
        got = ort.InferenceSession(str(onnx_dir / "count_embed_c1.onnx"), so).run(None, {"field_embs": f5.numpy()})[0]
        c1diff = float(np.abs(full.numpy() - got).max())
    if worst > 1e-3 or c1diff > 1e-4:
        raise RuntimeError(f"factorized scorer mismatch {worst} / count_embed_c1 {c1diff}")
    cfg_path = onnx_dir / "gliner2_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.setdefault("files", {})["span_factors"] = {"file": "span_factors.onnx", "inputs": {"word_embs": ["batch", "words", D]}, "outputs": {"start_hidden": ["batch", "words", 4 * D], "end_hidden": ["batch", "words", 4 * D]}}
    cfg["files"]["query_fold"] = {"file": "query_fold.onnx", "inputs": {"queries": ["queries", D]}, "outputs": {"query_hidden": ["queries", 4 * D], "query_bias": ["queries"]}}
    cfg["files"]["count_embed_c1"] = {"file": "count_embed_c1.onnx", "inputs": {"field_embs": ["fields", D]}, "outputs": {"struct_proj": [1, "fields", D]}}
    cfg["scorer"] = {"kind": "factorized", "logit": "relu(start_hidden[i] + end_hidden[i+w]) . query_hidden[q] + query_bias[q]", "max_abs_logit_diff": worst, "count_embed_c1_max_abs_diff": c1diff}
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
