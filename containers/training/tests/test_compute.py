"""Where and how an encoder job computes (encoder/compute.py): precision and batch from the device's
capabilities, and the model on the trainer's device before the baseline evaluation and the head warm-up."""

from __future__ import annotations

import pytest

from sift_trainer.encoder import compute
from sift_trainer.encoder.compute import Capabilities
from sift_trainer.job.hyperparameters import HyperparameterError

GiB = 1 << 30
H100 = Capabilities(device="cuda", bf16=True, free_bytes=78 * GiB, total_bytes=80 * GiB, name="H100", cpu_count=16)
T4 = Capabilities(device="cuda", bf16=False, free_bytes=14 * GiB, total_bytes=15 * GiB, name="T4", cpu_count=4)
CPU = Capabilities(device="cpu", cpu_count=16)
#: DeBERTa-v3-base-sized GLiNER2 (bench/serving/deberta_base_checkpoint.py): ~200 M weights, 768 x 12, 512 tokens
BASE = {"parameters": 200_000_000, "hidden": 768, "layers": 12, "heads": 12, "tokens": 512}


@pytest.mark.parametrize(
    "caps, asked, expected",
    [
        (H100, "auto", "bf16"),
        (T4, "auto", "fp16"),  # gliner2 pairs fp16 with its GradScaler
        (CPU, "auto", "fp32"),
        (H100, "fp32", "fp32"),  # a GPU job may opt out
        (H100, "fp16", "fp16"),
        (T4, "bf16", "fp16"),  # asked for what the GPU lacks: the precision it has, not a failed billed job
        (CPU, "bf16", "fp32"),  # the CPU stays fp32 whatever is asked
    ],
)
def test_mixed_precision_where_the_device_has_it(caps, asked, expected):
    assert compute.precision(caps, asked) == expected
    cfg = compute.plan(caps, requested_batch=None, default_batch=8, fits=4, precision=expected).trainer_config()
    assert (cfg["bf16"], cfg["fp16"]) == (expected == "bf16", expected == "fp16")


def test_the_precision_hyperparameter():
    assert compute.requested_precision({}) == "auto"
    assert compute.requested_precision({"precision": "FP32"}) == "fp32"
    assert compute.requested_precision({"bf16": True}) == "bf16"  # the older spelling
    assert compute.requested_precision({"bf16": False}) == "fp32"
    with pytest.raises(HyperparameterError, match="precision"):
        compute.requested_precision({"precision": "int8"})


def test_batch_from_memory_only_when_the_job_sets_none():
    full = compute.memory_batch(H100, trainable=BASE["parameters"], precision="bf16", **BASE)
    assert full == compute.MAX_AUTO_BATCH  # an 80 GB GPU fits more than the cap at base size
    small = compute.memory_batch(T4, trainable=BASE["parameters"], precision="fp16", **BASE)
    assert 1 <= small < full
    assert compute.memory_batch(T4, trainable=BASE["parameters"], precision="fp32", **BASE) <= small  # fp32: 2x
    tiny = Capabilities(device="cuda", free_bytes=2 * GiB, total_bytes=4 * GiB)
    assert compute.memory_batch(tiny, trainable=BASE["parameters"], precision="bf16", **BASE) == 1

    auto = compute.plan(H100, requested_batch=None, default_batch=8, fits=full, precision="bf16")
    assert (auto.batch_size, auto.micro_batch_size, auto.gradient_accumulation_steps) == (full, full, 1)
    # the job's batch_size is the rows per optimizer step: kept exactly, in micro-batches that fit
    for asked, fits, micro in ((8, 32, 8), (8, 3, 2), (12, 5, 4), (7, 4, 1)):
        c = compute.plan(T4, requested_batch=asked, default_batch=8, fits=fits, precision="fp16")
        assert (c.batch_size, c.micro_batch_size, c.gradient_accumulation_steps) == (asked, micro, asked // micro)


def test_the_cpu_trains_as_before():
    for asked, batch in ((None, 8), (16, 16)):
        c = compute.plan(CPU, requested_batch=asked, default_batch=8, fits=1, precision="fp32")
        assert c.trainer_config() == {
            "batch_size": batch,
            "gradient_accumulation_steps": 1,
            "fp16": False,
            "bf16": False,
            "eval_batch_size": 8,
            "num_workers": 0,
            "pin_memory": False,
        }
    gpu = compute.plan(H100, requested_batch=None, default_batch=8, fits=32, precision="bf16").trainer_config()
    assert gpu["num_workers"] > 0 and gpu["pin_memory"]  # tokenization and collation off the training loop


class _Stop(Exception):
    pass


def test_baseline_and_head_warmup_run_on_the_trainers_device(tmp_path, monkeypatch, encoder_base):
    """The model is moved to the trainer's device before the baseline evaluation and the head warm-up see it
    (on a GPU they ran on the CPU: 47 s of warm-up at base size). Stops before training."""
    from sift_trainer.data import metrics
    from sift_trainer.encoder import cls_warmup, training
    from sift_trainer.job.hyperparameters import Hyperparameters
    from sift_trainer.job.paths import JobPaths

    seen: list[tuple[str, str]] = []
    chosen = compute.detect()  # this machine's: the CPU here, the GPU where there is one

    def device_of(m) -> str:
        return next(m.parameters()).device.type

    real_load = training.load_model

    def load(path):
        model = real_load(path)
        real_to = model.to

        def to(*args, **kwargs):
            seen.append(("to", str(args[0] if args else kwargs.get("device"))))
            return real_to(*args, **kwargs)

        model.to = to
        return model

    real_evaluate, real_fit_head = metrics.evaluate, cls_warmup.fit_head

    def evaluate(m, rows, info, **kw):
        seen.append(("baseline", device_of(m)))
        return real_evaluate(m, rows, info, **kw)

    def fit_head(model, *args, **kw):
        seen.append(("warmup", device_of(model)))
        return real_fit_head(model, *args, **kw)

    def stop():
        raise _Stop

    monkeypatch.setattr(training, "load_model", load)
    monkeypatch.setattr(metrics, "evaluate", evaluate)
    monkeypatch.setattr(cls_warmup, "fit_head", fit_head)
    monkeypatch.setattr(training, "_make_trainer_class", stop)

    labels = ["refund", "delivery", "account"]
    texts = ["where is my parcel", "I want my money back", "reset my password", "the courier is late"]
    rows = [{"text": f"{texts[i % 4]} ({i})", "label": labels[i % 3]} for i in range(12)]
    hp = Hyperparameters.from_dict(
        {"base_model_path": str(encoder_base), "training_type": "full", "head_warmup_steps": 2, "seed": 1}
    )
    with pytest.raises(_Stop):
        training.train_encoder(hp, JobPaths.from_env({"SIFT_JOB_DIR": str(tmp_path)}), rows[:9], rows[9:])

    kinds = [k for k, _ in seen]
    assert "baseline" in kinds and "warmup" in kinds, seen
    first_move = kinds.index("to") if "to" in kinds else len(kinds)
    assert first_move < kinds.index("baseline") and first_move < kinds.index("warmup"), seen
    assert seen[first_move][1].startswith(chosen.device)
    assert all(dev == chosen.device for k, dev in seen if k in ("baseline", "warmup")), seen
