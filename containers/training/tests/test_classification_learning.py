"""Single-label classification with many labels learns (issue #13 item 0, docs/experiments/training.md).

Before the fix a fine-tuned model sat at chance: the head scores each [L] token alone, those outputs
barely carry the text, and the encoder's training-mode dropout drowned what they do carry — the trainer
never left the plateau where every label scores the same whatever the text (cls_warmup.py).
"""

from __future__ import annotations

import random

from sift_trainer.job.hyperparameters import Hyperparameters
from sift_trainer.job.paths import JobPaths

# 12 intents, each recognisable from its own cue words (never the label itself)
CUES = {
    "weather report": ["rain", "sunny", "forecast", "storm"],
    "play music": ["song", "playlist", "album", "guitar"],
    "book flight": ["airport", "plane", "boarding", "airline"],
    "order food": ["pizza", "burger", "delivery", "sushi"],
    "check balance": ["account", "savings", "money", "deposit"],
    "set alarm": ["wake", "morning", "clock", "snooze"],
    "find recipe": ["bake", "ingredients", "oven", "soup"],
    "call doctor": ["fever", "appointment", "clinic", "cough"],
    "rent car": ["vehicle", "sedan", "driving", "rental"],
    "pet care": ["puppy", "kitten", "vet", "leash"],
    "pay taxes": ["refund", "irs", "return", "deduction"],
    "watch movie": ["cinema", "film", "ticket", "trailer"],
}
TEMPLATES = [
    "can you help me with the {a} and the {b}",
    "i need something about {a} today",
    "what about my {a} , is the {b} ready",
    "please sort out the {a} for tomorrow",
    "tell me more on {a} and {b}",
    "my {b} question is about {a}",
]


def _rows(per_label: int, seed: int):
    rng = random.Random(seed)
    rows = []
    for label, cues in CUES.items():
        for _ in range(per_label):
            a, b = rng.sample(cues, 2)
            rows.append({"text": rng.choice(TEMPLATES).format(a=a, b=b), "label": label})
    rng.shuffle(rows)
    return rows


def _train_twelve_intents(tmp_path, encoder_base, training_type: str):
    """8 epochs on 8 rows per intent, validated on 4 others: the job's result, already checked to have learned."""
    from sift_trainer.encoder.training import train_encoder

    train, val = _rows(8, seed=1), _rows(4, seed=2)
    hp = Hyperparameters.from_dict(
        {"base_model_path": str(encoder_base), "training_type": training_type, "nr_epochs": 8, "seed": 3}
    )
    res = train_encoder(hp, JobPaths.from_env({"SIFT_JOB_DIR": str(tmp_path / "job")}), train, val)
    m = res["metrics"]
    assert m["evaluated_on"] == "validation" and m["n_examples"] == len(val)
    # single-label: micro F1 is accuracy; the base model is near chance, the fine-tuned one far above it
    assert m["baseline_f1"] < 1 / len(CUES) + 0.15, m["baseline_f1"]
    assert m["f1"] >= m["baseline_f1"] + 0.3, (m["baseline_f1"], m["f1"])
    assert m["warnings"] == []
    # the pooled route (encoder/pooled_cls.py), fitted on the final encoder, beats the [L]-token route
    route = m["route_metrics"]
    assert (
        route["pooled"]["n_examples"] == len(val)
        and route["gliner2"]["accuracy"] == m["per_head"]["classification"]["f1"]
    )
    assert route["pooled"]["accuracy"] > route["gliner2"]["accuracy"], route
    return res


# ~100 s on 1 thread (head warm-up + 96 steps): the one end-to-end check that classification learns
def test_many_label_classification_beats_the_base_model(tmp_path, encoder_base):
    _train_twelve_intents(tmp_path, encoder_base, "full")


# LoRA is the API's default training type: the same fix has to reach it, and its adapters have to carry
# the warmed-up head (they are applied to the recorded base when a checkpoint is loaded or deployed)
def test_lora_classification_learns_and_its_adapters_carry_the_trained_head(tmp_path, encoder_base):
    import torch

    from sift_trainer.encoder.training import load_model

    res = _train_twelve_intents(tmp_path, encoder_base, "lora")
    final = next(c for c in res["checkpoints"] if c["is_final"])
    assert final["kind"] == "adapter"
    reloaded = load_model(final["path"])  # the recorded base + this adapter, merged
    trained = res["model"].classifier.state_dict()
    for name, weight in reloaded.classifier.state_dict().items():
        assert torch.allclose(weight, trained[name], atol=1e-6), name
    base = load_model(encoder_base).classifier.state_dict()
    assert any(not torch.allclose(w, base[n]) for n, w in trained.items())  # the head did move
    # the model's adapter is saved after the pooled classifier's contrastive stage: base + adapter is the
    # exported encoder, the one the pooled head was fitted on
    assert res["pooled"].contrastive["pairs"] > 0
    from peft import PeftModel

    exported = PeftModel.from_pretrained(load_model(encoder_base), str(res["adapter_dir"])).merge_and_unload()
    exported = exported.encoder.state_dict()
    for name, weight in res["model"].encoder.state_dict().items():
        assert torch.allclose(weight, exported[name], atol=1e-5), name
