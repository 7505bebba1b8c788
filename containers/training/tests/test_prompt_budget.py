"""Large label sets on the 512-position MiniLM encoder: negative sampling in training, label groups for
validation metrics (sift_trainer/encoder/prompt_budget.py)."""

from __future__ import annotations

import copy
import json
import random

import pytest
from conftest import events, run_job, write_job

from sift_trainer.data.rows import convert, infer_tasks
from sift_trainer.encoder.prompt_budget import (
    GroupedExtractor,
    PromptFitter,
    PromptTooLong,
    _schema,
    check_records,
    max_positions,
    rows_over_words,
    sampled_dataset,
)

ADJ = [
    "urgent",
    "recurring",
    "disputed",
    "pending",
    "foreign",
    "blocked",
    "missing",
    "duplicate",
    "expired",
    "manual",
    "scheduled",
    "declined",
]
NOUN = [
    "card payment",
    "cash withdrawal",
    "bank transfer",
    "top up",
    "exchange rate",
    "account verification",
    "refund request",
    "direct debit",
    "pin change",
    "statement fee",
]
#: 120 intents of 3-5 tokens: ~600 prompt tokens at inference, ~1100 in gliner2's worst training augmentation
LABELS = [f"{a} {n}" for a in ADJ for n in NOUN]
assert len(LABELS) == 120


def _rows(n: int, seed: int):
    r = random.Random(seed)
    out = []
    for i in range(n):
        lab = LABELS[(i * 7) % len(LABELS)]
        out.append({"text": f"Hello, I have a question about my {lab}, can you help me with it today?", "label": lab})
    r.shuffle(out)
    # every label appears in the dataset so the head has all 120
    out += [{"text": f"Something about the {lab}.", "label": lab} for lab in LABELS]
    return out


@pytest.fixture(scope="module")
def model(encoder_base):
    from sift_trainer.encoder.training import load_model

    m = load_model(encoder_base)
    m.eval()
    return m


def test_sampled_training_prompts_fit_and_keep_gold(model):
    p = model.processor
    limit = max_positions(model)
    assert limit == 512
    rows = _rows(10, 1)
    info = infer_tasks(rows)
    assert len(info.class_labels) == 120
    recs = convert(rows[:10], info)
    fitter = PromptFitter(p, limit, max_words=256)
    # the full label set cannot fit: neither at inference nor in training augmentation
    full = recs[0]
    assert fitter.prompt_tokens(full["output"], worst=False) + fitter.text_tokens(full["input"]) > limit
    assert fitter.prompt_tokens(full["output"], worst=True) > 900
    # the piece-wise count equals gliner2's own preprocessing (inference mode)
    for r in recs[:3]:
        exact = len(p.transform_record(r["input"], copy.deepcopy(r["output"])).input_ids)
        assert fitter.prompt_tokens(r["output"], worst=False) + fitter.text_tokens(r["input"]) == exact
    n_sampled, bad = check_records(fitter, recs, worst=True)
    assert n_sampled == len(recs) and bad == []

    class Base:  # what ExtractorDataset holds after loading
        data = recs
        lengths = tuple(len(r["input"].split()) for r in recs)

    ds = sampled_dataset(Base, fitter, seed=3, training=True)
    p.change_mode(True)  # gliner2's training augmentation (synthetic labels, descriptions, dropping)
    random.seed(0)
    lengths, subsets = [], []
    try:
        for epoch in range(12):
            for i in range(len(recs)):
                text, out = ds[i]
                cls = out["classifications"][0]
                assert cls["true_label"][0] in cls["labels"]  # gold always kept
                assert set(cls["labels"]) <= set(LABELS)
                if i == 0:
                    subsets.append(tuple(cls["labels"]))
                rec = p._transform_record({"text": p._normalize_text(text), "schema": copy.deepcopy(out)})
                lengths.append(len(rec.input_ids))
    finally:
        p.change_mode(False)
    assert max(lengths) <= limit, max(lengths)
    assert max(lengths) > 400  # the budget is used, not wasted
    assert len(set(subsets)) > 1  # re-sampled on every read (epoch)
    assert all(20 < len(s) < 120 for s in subsets)
    # seeded: a second dataset with the same seed draws the same subsets
    ds2 = sampled_dataset(Base, fitter, seed=3, training=True)
    assert [tuple(ds2[0][1]["classifications"][0]["labels"]) for _ in range(3)] == subsets[:3]
    # an example that fits is passed through untouched
    small = {"input": "Tim Cook leads Apple.", "output": {"entities": {"person": ["Tim Cook"], "company": ["Apple"]}}}
    assert fitter.fit(small, random.Random(1)) is small


def test_a_label_that_can_never_fit_is_reported(model):
    fitter = PromptFitter(model.processor, 512)
    huge = " ".join(["word"] * 600)
    rec = {
        "input": "short text",
        "output": {"classifications": [{"task": "classification", "labels": [huge, "b"], "true_label": [huge]}]},
    }
    with pytest.raises(PromptTooLong, match="gold labels alone"):
        fitter.check(rec)
    long_text = {"input": " ".join(["token"] * 505), "output": {"entities": {"person": []}}}
    with pytest.raises(PromptTooLong, match="shorten the text"):
        PromptFitter(model.processor, 512, max_words=None).check(long_text)


def test_grouped_prediction_merges_like_the_direct_path(model):
    from gliner2 import Schema

    text = "Tim Cook met Satya Nadella in Paris to talk about a refund request for a card payment."
    spec = {
        "entities": ["person", "city", "company", "date"],
        "classifications": [{"task": "intent", "labels": ["refund request", "card payment", "weather", "travel"]}],
    }
    direct = model.batch_extract([text], Schema.from_dict(spec), include_confidence=True, include_spans=True)
    # fits: passed through unchanged
    g512 = GroupedExtractor(model, 512)
    assert g512.batch_extract([text], Schema.from_dict(spec), include_confidence=True, include_spans=True) == direct
    assert g512.groups_used == 0
    # force groups with a small limit: the merge equals the per-group direct runs
    prompt_and_text = len(model.processor.transform_record(text, Schema.from_dict(spec).build()).input_ids)
    small = GroupedExtractor(model, prompt_and_text - 1, group_text_tokens=prompt_and_text - 14)
    groups = small.plan(spec)
    assert sum("entities" in g for g in groups) >= 2 and sum("classifications" in g for g in groups) >= 2
    got = small.batch_extract([text], Schema.from_dict(spec), include_confidence=True, include_spans=True)[0]
    assert small.groups_used == len(groups)
    want_entities, logits = {}, {}
    for g in groups:
        r = model.batch_extract([text], _schema(g), include_confidence=True, include_spans=True)[0]
        want_entities.update(r.get("entities") or {})
        for it in r.get("intent") or []:
            logits[it["label"]] = it["confidence"]
    assert got.get("entities", {}) == want_entities
    assert set(logits) == set(spec["classifications"][0]["labels"])
    # single-label: one softmax over every group's logits
    import math

    xs = {l: math.log(p) - math.log1p(-p) for l, p in logits.items()}
    z = sum(math.exp(x) for x in xs.values())
    best = max(xs, key=xs.get)
    assert got["intent"]["label"] == best
    assert got["intent"]["confidence"] == pytest.approx(math.exp(xs[best]) / z, rel=1e-6)


def test_validation_metrics_on_120_labels_do_not_crash(model):
    from sift_trainer.data.metrics import evaluate

    rows = _rows(6, 2)
    info = infer_tasks(rows)
    g = GroupedExtractor(model, max_positions(model))
    m = evaluate(g, rows[:6], info)
    assert g.groups_used >= 2
    assert m["n_examples"] == 6 and 0.0 <= m["f1"] <= 1.0
    assert m["per_head"]["classification"]["tp"] + m["per_head"]["classification"]["fn"] == 6


def test_training_job_with_120_labels(tmp_path, encoder_base):
    rows = _rows(20, 4)
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(encoder_base),
            "training_type": "full",
            "nr_epochs": 1,
            "max_steps": 3,
            "batch_size": 4,
            "seed": 5,
            "validation_split": 0.05,
        },
        rows,
    )
    p = run_job(job)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = events(p.stdout)
    budget = next(e for e in ev if e["event"] == "prompt_budget")
    assert budget["max_positions"] == 512 and budget["train_rows_sampled"] > 100
    assert [e for e in ev if e["event"] == "progress"][-1]["step"] == 3
    done = ev[-1]
    assert done["event"] == "completed", ev[-3:]
    manifest = json.loads((job / "model" / "manifest.json").read_text())
    assert len(manifest["tasks"]["classification"]["labels"]) == 120
    assert 0.0 <= manifest["metrics"]["f1"] <= 1.0 and manifest["metrics"]["n_examples"] > 0


def test_rows_over_max_words_are_named(model):
    """gliner2 trains on a text's first max_len words: the trainer names the rows that cuts (``long_texts``)."""
    recs = [{"input": " ".join(["word"] * n), "output": {"entities": {"person": []}}} for n in (10, 256, 257, 900)]
    assert rows_over_words(model.processor, recs, 256) == [2, 3]
    assert rows_over_words(model.processor, recs, None) == []
