"""The served ONNX export: eager-attention encoder, span scores in one graph, int8 encoder, and the mini
build's re-export of already-trained weights when only the export code changed."""

from __future__ import annotations

import json
import shutil

import numpy as np


def test_span_scores_graph_equals_span_rep_dot_queries(tmp_path, encoder_base):
    """span_scores.onnx == sigmoid(span_rep . query), the scores gliner2 decodes, on a padded batch."""
    import onnxruntime as ort
    import torch
    from gliner2 import GLiNER2

    from sift_trainer.export.export_onnx import export_fragments

    model = GLiNER2.from_pretrained(str(encoder_base)).eval()
    cfg = export_fragments(model, tmp_path)
    assert cfg["format"] == "sift-gliner2-fragments/2"
    assert cfg["encoder_graph"] == {"attention": "eager", "softmax_nodes": 6, "layers": 6}
    D, W = cfg["hidden_size"], cfg["max_width"]
    g = torch.Generator().manual_seed(5)
    we = torch.randn(2, 7, D, generator=g)
    q = torch.randn(2, 3, D, generator=g)
    got = ort.InferenceSession(str(tmp_path / "onnx" / "span_scores.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"word_embs": we.numpy(), "queries": q.numpy()}
    )[0]
    assert got.shape == (2, 3, 7, W)
    layer = model.span_rep.span_rep_layer
    with torch.no_grad():
        for b, n in ((0, 7), (1, 4)):  # row 1: 3 padded words
            starts = torch.arange(n).unsqueeze(1).expand(n, W)
            ends = starts + torch.arange(W).unsqueeze(0)
            valid = ends < n
            si = torch.stack(
                [torch.where(valid, starts, 0).reshape(-1), torch.where(valid, ends, 0).reshape(-1)], -1
            ).unsqueeze(0)
            ref = torch.sigmoid(torch.einsum("lwd,qd->qlw", layer(we[b : b + 1, :n], si)[0], q[b])).numpy()
            assert np.abs(ref - got[b, :, :n])[:, valid.numpy()].max() < 1e-4


def test_mini_build_reexports_trained_weights_when_only_the_export_changed(tmp_path, encoder_base, monkeypatch):
    from sift_trainer.build import build_mini

    out = tmp_path / "model"
    shutil.copytree(encoder_base, out, ignore=shutil.ignore_patterns("onnx"))
    (out / "onnx").mkdir()
    (out / "onnx" / "encoder.onnx").write_bytes(b"stale")  # an older export
    th = build_mini.training_hash(dict(build_mini.DEFAULTS))
    (out / "manifest.json").write_text(
        json.dumps({"training_hash": th, "build_params": build_mini.DEFAULTS, "export_hash": "older"})
    )
    (out / "model.safetensors").touch(exist_ok=True)
    weights = (out / "model.safetensors").read_bytes()
    assert build_mini.is_built(out, th)

    done = build_mini.reexport(out, 1, th)
    assert done["format"] == "sift-gliner2-fragments/2"
    m = json.loads((out / "manifest.json").read_text())
    assert m["export_hash"] == build_mini.export_hash() and m["onnx"]["format"] == "sift-gliner2-fragments/2"
    assert (out / "onnx" / "encoder.onnx").stat().st_size > 1_000_000  # the stale file was replaced
    for f in ("span_scores.onnx", "count_embed_c1.onnx", "encoder.int8.onnx"):
        assert (out / "onnx" / f).is_file(), f
    assert (out / "model.safetensors").read_bytes() == weights  # not retrained
    assert not (out / "onnx.old").exists() and not (tmp_path / "model.onnx-building").exists()
