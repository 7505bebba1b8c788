"""Single-label classification training: the loss, the gold label in every prompt, sampled negatives."""

from __future__ import annotations

import copy
import math
import random

import pytest
import torch

from sift_trainer.data.rows import convert, infer_tasks
from sift_trainer.encoder import cls_loss, sampling
from sift_trainer.encoder.prompt_budget import cap_class_negatives, sampled_dataset

LABELS = [f"intent number {i}" for i in range(60)]


def _records(n: int = 12):
    rows = [{"text": f"please help me with request {i}", "label": LABELS[i % len(LABELS)]} for i in range(n)]
    rows += [{"text": "filler", "label": lab} for lab in LABELS]  # every label in the vocabulary
    info = infer_tasks(rows)
    return convert(rows[:n], info)


def test_softmax_loss_has_no_all_negative_shortcut():
    """With every label scored alike (the text ignored), the binary loss still pulls every logit down —
    a gradient that needs no text — while the softmax loss sits at log(n) with a zero-sum gradient."""
    n = 30
    target = torch.zeros(n)
    target[7] = 1.0
    for single, expect_loss in ((True, math.log(n)), (False, None)):
        logits = torch.zeros(n, requires_grad=True)
        loss = cls_loss.classification_loss(logits, target, single_label=single)
        loss.backward()
        if single:
            assert loss.item() == pytest.approx(expect_loss, rel=1e-6)
            assert logits.grad.sum().item() == pytest.approx(0.0, abs=1e-6)
            assert logits.grad[7] < 0 and (logits.grad[torch.arange(n) != 7] > 0).all()
        else:  # gliner2's summed BCE: 29 negatives outweigh the gold
            assert logits.grad.sum().item() == pytest.approx(0.5 * (n - 2), rel=1e-6)
    # rows without exactly one gold label (multi-label, or none) keep the binary loss
    two = torch.zeros(n)
    two[[1, 2]] = 1.0
    z = torch.zeros(n)
    assert cls_loss.classification_loss(z, two, True).item() == pytest.approx(n * math.log(2), rel=1e-6)


def test_installed_loss_is_the_softmax_over_the_prompt_labels(encoder_base):
    from sift_trainer.encoder.training import load_model

    model = load_model(encoder_base)
    recs = _records(4)
    p = model.processor
    p.sampling_config = sampling.sampling_config(single_label=True)
    random.seed(0)
    batch = p.collate_fn_train([(r["input"], copy.deepcopy(r["output"])) for r in recs])
    cls_loss.install(model)
    model.eval()  # no dropout: the same embeddings twice
    with torch.no_grad():
        got = model(batch)["classification_loss"].item()
        _tok, schema_embs = model._encode_batch(batch)
        want = 0.0
        for i in range(len(recs)):
            logits = model.classifier(torch.stack(schema_embs[i][0])[1:]).squeeze(-1)
            target = batch.structure_labels[i][0]
            assert sum(target) == 1 and len(target) == logits.shape[0]
            want += torch.nn.functional.cross_entropy(logits[None], torch.tensor([target.index(1)])).item()
    assert got == pytest.approx(want, rel=1e-4)


def test_every_single_label_prompt_carries_its_gold_label(encoder_base):
    """gliner2 drops labels and re-adds the gold one only half the time: a prompt whose target is all
    zeros teaches a single-label task nothing. Single-label jobs always re-add it."""
    from sift_trainer.encoder.training import load_model

    p = load_model(encoder_base).processor
    recs = _records(8)

    def zero_gold_share(cfg) -> float:
        p.sampling_config = cfg
        random.seed(1)
        zero = total = 0
        for _ in range(40):
            b = p.collate_fn_train([(r["input"], copy.deepcopy(r["output"])) for r in recs])
            for lab in b.structure_labels:
                total += 1
                zero += sum(lab[0]) == 0
        return zero / total

    assert zero_gold_share(sampling.sampling_config(single_label=False)) > 0.02
    assert zero_gold_share(sampling.sampling_config(single_label=True)) == 0.0


def test_training_prompts_hold_gold_and_a_fresh_sample_of_negatives():
    recs = _records(12)

    class Base:
        data = recs
        lengths = tuple(len(r["input"].split()) for r in recs)

    ds = sampled_dataset(Base, None, seed=5, training=True, max_class_negatives=6)
    seen = set()
    for _epoch in range(5):
        for i, rec in enumerate(recs):
            _text, out = ds[i]
            c = out["classifications"][0]
            assert c["true_label"][0] in c["labels"] and len(c["labels"]) == 7
            assert set(c["labels"]) <= set(LABELS)
            if i == 0:
                seen.add(tuple(c["labels"]))
            assert len(rec["output"]["classifications"][0]["labels"]) == len(LABELS)  # the stored record is untouched
    assert len(seen) == 5  # another subset every epoch
    # evaluation (eval loss) sees every label
    ev = sampled_dataset(Base, None, seed=5, training=False, max_class_negatives=6)
    assert len(ev[0][1]["classifications"][0]["labels"]) == len(LABELS)
    # a task already within the cap is passed through as is
    small = recs[0]["output"]
    assert cap_class_negatives(small, random.Random(0), len(LABELS)) is small


def test_loader_workers_draw_another_subset_every_epoch():
    """On a GPU the rows are read in DataLoader workers (encoder/compute.py), each with its own copy of the
    dataset's read counts: a record must still meet another negative subset every epoch."""
    recs = _records()

    class Base:
        data = recs
        lengths = tuple(len(r["input"].split()) for r in recs)

    ds = sampled_dataset(Base, None, seed=5, training=True, max_class_negatives=6)
    torch.manual_seed(0)
    # persistent workers, as gliner2 runs them: which worker reads a record changes between epochs
    loader = torch.utils.data.DataLoader(
        ds, batch_size=3, shuffle=True, num_workers=2, persistent_workers=True, collate_fn=list
    )
    seen: dict[str, set] = {}
    for _epoch in range(3):
        for text, out in (item for batch in loader for item in batch):
            seen.setdefault(text, set()).add(tuple(out["classifications"][0]["labels"]))
    assert len(seen) == len(recs) and all(len(s) == 3 for s in seen.values()), seen


def test_head_warmup_fits_the_head_on_frozen_features_and_training_runs_without_encoder_dropout(encoder_base):
    """cls_warmup.py: after the warm-up the head ranks the training prompts' gold labels above chance,
    the encoder is unchanged, and training-mode [L] outputs no longer carry dropout noise."""
    from sift_trainer.encoder import cls_warmup
    from sift_trainer.encoder.training import load_model

    model = load_model(encoder_base)
    topics = ["weather", "music", "food", "money", "travel", "health"]
    rows = [
        {"text": f"{opener} {t} {closer}", "label": t}
        for t in topics
        for opener, closer in (("a question about", "today"), ("tell me more on", "please"))
    ]
    recs = convert(rows, infer_tasks(rows))
    before = {k: v.clone() for k, v in model.encoder.state_dict().items()}

    def prepare(rec, rng):
        return {**rec, "output": cap_class_negatives(rec["output"], rng, 3)}  # gold + 3

    out = cls_warmup.fit_head(model, recs, prepare, steps=600, seed=0)
    assert out["prompts"] == 12 * out["label_orders"] and out["steps"] == 600
    assert out["train_accuracy"] > 1 / 4 + 0.2 and out["train_loss"] < math.log(4) - 0.15, out  # 4 labels per prompt
    assert all(torch.equal(before[k], v) for k, v in model.encoder.state_dict().items())

    assert cls_warmup.quiet_encoder_dropout(model) > 0
    model.train()
    b = model.processor.collate_fn_inference([(r["input"], copy.deepcopy(r["output"])) for r in recs[:2]])
    with torch.no_grad():
        first = model._encode_batch(b)[1][0][0][1]
        again = model._encode_batch(b)[1][0][0][1]
    assert torch.equal(first, again)
