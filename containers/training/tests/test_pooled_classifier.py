"""The pooled classifier (encoder/pooled_cls.py, export/export_pooled.py; issue #30 item 1).

A job with a label column trains a head over the encoder's mean-pooled text embedding beside the GLiNER2
heads and exports it as onnx/pooled_classifier.{onnx,json}; the model directory still loads in gliner2.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_classification_learning import CUES, _rows

from sift_trainer.job.hyperparameters import HyperparameterError, Hyperparameters


def _ort_logits(model_dir, texts):
    """What serving does: tokenizer.json with its special tokens → encoder.onnx → pooled_classifier.onnx."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    meta = json.loads((model_dir / "onnx" / "pooled_classifier.json").read_text())
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(meta["max_tokens"])
    tok.enable_padding()
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    s_enc = ort.InferenceSession(str(model_dir / "onnx" / "encoder.onnx"), providers=["CPUExecutionProvider"])
    s_cls = ort.InferenceSession(str(model_dir / "onnx" / "pooled_classifier.onnx"), providers=["CPUExecutionProvider"])
    hidden = s_enc.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    return meta, s_cls.run(None, {"hidden_states": hidden, "attention_mask": mask})[0]


@pytest.fixture(scope="module")
def base_model(encoder_base):
    from sift_trainer.encoder.training import load_model

    return load_model(encoder_base).eval()


def test_the_exported_fragment_serves_what_the_trainer_measured_and_gliner2_still_loads(tmp_path, base_model):
    from sift_trainer.encoder import pooled_cls
    from sift_trainer.encoder.training import save_encoder_model

    train, val = _rows(6, seed=1), _rows(3, seed=2)
    pc = pooled_cls.fit(base_model, train, val, list(CUES), False, seed=0)
    saved = save_encoder_model(base_model, tmp_path / "model", pooled=pc)
    out = tmp_path / "model"

    meta, logits = _ort_logits(out, [r["text"] for r in val])
    assert meta == {
        "format": 1,
        "labels": list(CUES),
        "multi_label": False,
        "pooling": "mean",
        "max_tokens": 256,
        "trained_rows": len(train),
        "route_metrics": pc.route_metrics,
        "parity_max_abs_diff": saved["pooled"]["parity_max_abs_diff"],
    }
    assert logits.shape == (len(val), len(CUES))
    acc = float(np.mean([meta["labels"][i] == r["label"] for i, r in zip(logits.argmax(-1), val)]))
    assert round(acc, 4) == pc.route_metrics["pooled"]["accuracy"]  # served == measured (stored to 4 places)
    assert acc > 0.5  # 12 intents: chance is 0.08
    parity = meta["parity_max_abs_diff"]
    # int8: a sanity bound (0.30 logits measured on a 12-intent model); fp32 is exact
    assert parity["pooled_classifier"] < 1e-4 and parity["pooled_classifier_int8_encoder"] < 1.0, parity
    cfg = json.loads((out / "onnx" / "gliner2_config.json").read_text())
    assert cfg["files"]["pooled_classifier"]["outputs"] == {"logits": ["batch", len(CUES)]}
    assert max(cfg["parity_max_abs_diff"].values()) < 1e-3  # the int8 diff stays out of the fragments' bound

    from gliner2 import GLiNER2  # the extra files are ignored: from_pretrained gives the GLiNER2 route

    m = GLiNER2.from_pretrained(str(out), map_location="cpu")
    assert "classification" in m.classify_text(val[0]["text"], {"classification": list(CUES)})


def test_contrastive_stage_pulls_same_label_rows_together(encoder_base):
    """SetFit's objective moves the pooled embeddings: same-label cosine up relative to different-label."""
    import torch

    from sift_trainer.encoder import pooled_cls
    from sift_trainer.encoder.training import load_model

    model = load_model(encoder_base).eval()
    rows = _rows(4, seed=5)
    y = pooled_cls.targets(rows, list(CUES), False)
    eye = torch.eye(len(rows), dtype=torch.bool)
    same = (y[:, None] == y[None, :]) & ~eye

    def margin():
        X = pooled_cls.pooled_embeddings(model.encoder, model.processor.tokenizer, [r["text"] for r in rows], 256)
        cos = X @ X.T
        return float(cos[same].mean() - cos[~same & ~eye].mean())

    before = margin()
    stats = pooled_cls.contrastive_tune(
        model.encoder, model.processor.tokenizer, rows, False, 256, iterations=1, lr=5e-5, seed=0
    )
    assert stats["pairs"] == 2 * len(rows) and stats["steps"] == 6
    assert margin() > before + 0.05, (before, margin())


def test_multi_label_head_is_per_label_sigmoid(base_model):
    """labels column: BCE per label; the route scores micro F1 at 0.5 (frozen encoder, no job)."""
    from sift_trainer.encoder import pooled_cls

    model = base_model
    rows = [{**r, "labels": [r["label"]] + (["urgent"] if i % 3 == 0 else [])} for i, r in enumerate(_rows(5, seed=4))]
    for r in rows:
        r.pop("label")
    labels = [*CUES, "urgent"]
    pc = pooled_cls.fit(model, rows[:40], rows[40:], labels, True, seed=0)
    assert pc.multi_label and pc.manifest()["multi_label"] is True
    y = pooled_cls.targets(rows[:40], labels, True)
    assert y.shape == (40, len(labels)) and y.sum(-1).min() >= 1
    assert set(pc.route_metrics["pooled"]) >= {"f1", "precision", "recall", "exact_match"}
    X = pooled_cls.pooled_embeddings(model.encoder, model.processor.tokenizer, [r["text"] for r in rows[:40]], 256)
    train_fit = pooled_cls.route_score(pooled_cls.predict_scores(pc.head, X, True), y, True)
    assert train_fit["f1"] > 0.8, train_fit  # sigmoids fit several labels per row


def test_only_a_label_column_turns_the_pooled_classifier_on(encoder_base):
    from sift_trainer.data.rows import infer_tasks
    from sift_trainer.encoder import pooled_cls

    rows = [{"text": "tim cook leads apple", "entities": [{"text": "tim cook", "label": "person"}]}]
    hp = Hyperparameters.from_dict({"base_model_path": str(encoder_base)})
    assert pooled_cls.mode(hp, infer_tasks(rows)) == "off"
    labelled = infer_tasks(_rows(2, seed=0))
    assert pooled_cls.mode(hp, labelled) == "on"
    off = Hyperparameters.from_dict({"base_model_path": str(encoder_base), "pooled_classifier": "off"})
    assert pooled_cls.mode(off, labelled) == "off"
    with pytest.raises(HyperparameterError, match="pooled_classifier"):
        pooled_cls.mode(Hyperparameters.from_dict({"base_model_path": "x", "pooled_classifier": "on"}), labelled)
