"""Epochs sized from the dataset, rates per training type; explicit hyperparameters always win (schedule.py)."""

from __future__ import annotations

import pytest

from sift_trainer.encoder import schedule
from sift_trainer.job.hyperparameters import Hyperparameters


def hp(**kw) -> Hyperparameters:
    return Hyperparameters.from_dict({"base_model_path": "/base", **kw})


@pytest.mark.parametrize("rows, epochs", [(8, 30), (180, 11), (270, 8), (900, 6), (10_000, 6)])
def test_epochs_reach_a_floor_of_optimizer_steps(rows, epochs):
    plan = schedule.plan(hp(), rows)
    assert plan.epochs == epochs and "nr_epochs" in plan.automatic
    if epochs < schedule.MAX_EPOCHS:  # below the cap the floor is met: small data gets enough updates
        assert plan.planned_steps >= schedule.MIN_OPTIMIZER_STEPS
    assert plan.planned_steps == epochs * -(-rows // schedule.DEFAULT_BATCH_SIZE)


def test_classification_only_jobs_keep_three_epochs():
    # many rows: entity jobs get MIN_EPOCHS passes, a single-label classification job only 3
    assert schedule.plan(hp(), 900).epochs == schedule.MIN_EPOCHS == 6
    assert schedule.plan(hp(), 900, classification_only=True).epochs == schedule.MIN_EPOCHS_CLASSIFICATION == 3
    # few rows: the step floor decides for both
    assert schedule.plan(hp(), 180, classification_only=True).epochs == 11


def test_a_batch_from_gpu_memory_only_when_the_job_sets_none():
    # encoder/compute.py's batch (32 rows on a large GPU): fewer steps an epoch, so more epochs to the floor
    auto = schedule.plan(hp(), 900, auto_batch=32)
    assert (auto.batch_size, auto.steps_per_epoch, auto.epochs) == (32, 29, 9) and "batch_size" in auto.automatic
    asked = schedule.plan(hp(batch_size=8), 900, auto_batch=32)
    assert (asked.batch_size, asked.epochs) == (8, 6) and "batch_size" not in asked.automatic


def test_rates_per_training_type():
    # literal values: the measured defaults (docs/training.md), not the module's own constants
    lora, full = schedule.plan(hp(training_type="lora"), 200), schedule.plan(hp(training_type="full"), 200)
    assert lora.task_lr == lora.encoder_lr == 3e-4
    assert (full.encoder_lr, full.task_lr) == (3e-5, 5e-4)
    assert lora.warmup_ratio == full.warmup_ratio == schedule.WARMUP_RATIO


def test_lora_rate_by_rows():
    # few passes over many rows get the larger LoRA rate; many passes over few rows keep the smaller one
    # literal values (d6c386b: 1e-3 from 300 rows, measured): the API's 300 rows are 270 after the
    # trainer's 10 % validation split; test/core/training/loraRateParity.test.ts compares the two rules
    small = schedule.plan(hp(training_type="lora"), 269)
    large = schedule.plan(hp(training_type="lora"), 270)
    assert small.task_lr == small.encoder_lr == 3e-4
    assert large.task_lr == large.encoder_lr == 1e-3
    assert "learning_rate" in large.automatic
    assert schedule.plan(hp(training_type="lora", learning_rate="2e-4"), 5_000).task_lr == 2e-4
    # full fine-tuning's rates do not depend on the size
    assert schedule.plan(hp(training_type="full"), 5_000).encoder_lr == 3e-5


def test_explicit_hyperparameters_win():
    plan = schedule.plan(
        hp(
            training_type="full",
            nr_epochs="3",
            learning_rate="2e-4",
            task_lr="1e-3",
            batch_size="4",
            warmup_ratio="0.3",
        ),
        200,
    )
    assert (plan.epochs, plan.batch_size, plan.encoder_lr, plan.task_lr, plan.warmup_ratio) == (3, 4, 2e-4, 1e-3, 0.3)
    assert plan.automatic == []
    lora = schedule.plan(hp(training_type="lora", learning_rate="5e-5"), 200)
    assert lora.task_lr == 5e-5 and "learning_rate" not in lora.automatic
    # max_steps alone bounds the run: the epoch count is not sized up past it
    capped = schedule.plan(hp(max_steps="7"), 200)
    assert capped.planned_steps == 7 and "nr_epochs" not in capped.automatic
