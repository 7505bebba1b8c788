"""The pooled classifier (encoder/pooled_cls.py, export/export_pooled.py; issue #30 item 1).

A job with a label column trains a head over the encoder's mean-pooled text embedding beside the GLiNER2
heads and exports it as onnx/pooled_classifier.{onnx,json}; the model directory still loads in gliner2.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_classification_learning import CUES, _rows

from sift_trainer.job.hyperparameters import Hyperparameters
from sift_trainer.job.paths import JobPaths


def _job(tmp_path, encoder_base, train, val, **extra):
    from sift_trainer.encoder.training import save_encoder_model, train_encoder

    hp = Hyperparameters.from_dict(
        {"base_model_path": str(encoder_base), "training_type": "full", "nr_epochs": 1, "seed": 3, **extra}
    )
    res = train_encoder(hp, JobPaths.from_env({"SIFT_JOB_DIR": str(tmp_path / "job")}), train, val)
    out = tmp_path / "model"
    saved = save_encoder_model(res["model"], out, pooled=res["pooled"])
    return res, saved, out


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


# one short full job (1 epoch) on 12 intents: ~? s on 1 thread
def test_single_label_job_exports_a_pooled_route_that_beats_the_gliner2_route(tmp_path, encoder_base):
    train, val = _rows(6, seed=1), _rows(3, seed=2)
    res, saved, out = _job(tmp_path, encoder_base, train, val)
    route = res["metrics"]["route_metrics"]
    assert route["pooled"]["n_examples"] == len(val)
    assert route["pooled"]["accuracy"] >= route["gliner2"]["accuracy"] + 0.2, route
    assert res["pooled"].contrastive["iterations"] > 0 and res["pooled"].contrastive["pairs"] > 0

    meta, logits = _ort_logits(out, [r["text"] for r in val])
    assert {k: meta[k] for k in ("format", "multi_label", "pooling", "trained_rows")} == {
        "format": 1,
        "multi_label": False,
        "pooling": "mean",
        "trained_rows": len(train),
    }
    assert sorted(meta["labels"]) == sorted(CUES) and meta["max_tokens"] == 256
    assert meta["route_metrics"] == route
    assert logits.shape == (len(val), len(CUES))
    acc = float(np.mean([meta["labels"][i] == r["label"] for i, r in zip(logits.argmax(-1), val)]))
    assert acc == pytest.approx(route["pooled"]["accuracy"], abs=1e-6)  # served == measured
    assert saved["pooled"]["parity_max_abs_diff"]["pooled_classifier"] < 1e-3
    assert "pooled_classifier_int8_encoder" in saved["pooled"]["parity_max_abs_diff"]

    from gliner2 import GLiNER2  # the extra files are ignored: from_pretrained gives the GLiNER2 route

    m = GLiNER2.from_pretrained(str(out), map_location="cpu")
    got = m.classify_text(val[0]["text"], {"classification": list(CUES)})
    assert "classification" in got


def test_multi_label_head_is_per_label_sigmoid(encoder_base):
    """labels column: BCE per label; the route scores micro F1 at 0.5 (frozen encoder, no job)."""
    from sift_trainer.encoder import pooled_cls
    from sift_trainer.encoder.training import load_model

    model = load_model(encoder_base)
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


def test_no_label_column_exports_no_pooled_classifier(tmp_path, encoder_base):
    from sift_trainer.data.rows import infer_tasks
    from sift_trainer.encoder import pooled_cls

    rows = [{"text": "tim cook leads apple", "entities": [{"text": "tim cook", "label": "person"}]}]
    hp = Hyperparameters.from_dict({"base_model_path": str(encoder_base)})
    assert pooled_cls.mode(hp, infer_tasks(rows)) == "off"
    labelled = infer_tasks(_rows(2, seed=0))
    assert pooled_cls.mode(hp, labelled) == "on"
    off = Hyperparameters.from_dict({"base_model_path": str(encoder_base), "pooled_classifier": "off"})
    assert pooled_cls.mode(off, labelled) == "off"
    from sift_trainer.encoder.training import load_model, save_encoder_model

    saved = save_encoder_model(load_model(encoder_base), tmp_path / "m", pooled=None)
    assert saved["pooled"] is None and not (tmp_path / "m" / "onnx" / "pooled_classifier.onnx").exists()
