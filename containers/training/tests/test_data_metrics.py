"""Row conversion, head inference, hyperparameter parsing and metric computation (no training)."""

from __future__ import annotations

import pytest

from sift_trainer.build import synthetic
from sift_trainer.data.metrics import score_predictions
from sift_trainer.data.rows import DatasetError, convert, infer_tasks, require_trainable, split
from sift_trainer.job.hyperparameters import HyperparameterError, Hyperparameters
from sift_trainer.job.paths import JobPaths


def test_infer_and_convert_all_heads():
    rows = [
        {
            "text": "Tim Cook leads Apple in Cupertino.",
            "entities": [{"text": "Tim Cook", "label": "person", "start": 0, "end": 8}, ["Apple", "company"]],
            "label": "business",
            "json_structures": [{"org": {"name": "Apple", "city": "Cupertino"}}],
            "relations": [{"relation": "works for", "head": "Tim Cook", "tail": "Apple"}],
        },
        {"text": "Rain in Paris.", "entities": [], "label": "weather", "json_structures": [{"org": {"city": "Paris"}}]},
    ]
    info = infer_tasks(rows)
    assert info.heads == ["entities", "classification", "json_structures", "relations"]
    assert info.entity_labels == ["person", "company"] and info.class_labels == ["business", "weather"]
    recs = convert(rows, info)
    assert recs[0]["output"]["entities"] == {"person": ["Tim Cook"], "company": ["Apple"]}
    assert recs[1]["output"]["entities"] == {"person": [], "company": []}
    assert recs[1]["output"]["json_structures"] == [{"org": {"city": "Paris", "name": ""}}]
    assert recs[0]["output"]["relations"] == [{"works for": {"head": "Tim Cook", "tail": "Apple"}}]
    assert recs[0]["output"]["classifications"][0]["true_label"] == ["business"]
    schema = info.schema()
    assert schema["classifications"][0]["task"] == "classification"


def test_bad_rows_report_every_error():
    rows = [
        {"text": "a b", "entities": [{"text": "zzz", "label": "x"}]},
        {"text": "", "entities": []},
        {"text": "ok", "entities": [{"text": "ok", "label": "x", "start": 0, "end": 1}]},
    ]
    info = infer_tasks(rows)
    with pytest.raises(DatasetError) as e:
        convert(rows, info)
    assert [x["row"] for x in e.value.errors] == [0, 1, 2]


def test_hyperparameters_from_sagemaker_strings():
    hp = Hyperparameters.from_dict(
        {
            "base_model_path": "/m",
            "nr_epochs": "3",
            "learning_rate": "1e-4",
            "rl_config": '{"beta": 0.2}',
            "training_algorithm": "dpo",
            "training_type": "lora",
            "custom": "7",
        }
    )
    assert (
        hp.nr_epochs == 3 and hp.learning_rate == 1e-4 and hp.rl_config == {"beta": 0.2} and hp.extra == {"custom": 7}
    )
    with pytest.raises(HyperparameterError, match="num_generations"):
        Hyperparameters.from_dict(
            {"base_model_path": "/m", "training_algorithm": "grpo", "rl_config": {"reward": "exact_match"}}
        )
    with pytest.raises(HyperparameterError, match="learning_rate"):
        Hyperparameters.from_dict({"base_model_path": "/m", "learning_rate": "5"})


def test_paths_follow_sagemaker_env(tmp_path):
    p = JobPaths.from_env({"SIFT_JOB_DIR": str(tmp_path), "SM_MODEL_DIR": "/x/model", "SM_CHANNEL_TRAIN": "/d/train"})
    assert (
        p.model_dir.as_posix() == "/x/model"
        and p.channel("train", {"SM_CHANNEL_TRAIN": "/d/train"}).as_posix() == "/d/train"
    )
    assert p.failure_file == tmp_path / "output" / "failure"
    assert p.hyperparameters == tmp_path / "input" / "config" / "hyperparameters.json"
    assert JobPaths.from_env({}).root.as_posix() == "/opt/ml"


def test_metrics_counts():
    rows = [
        {
            "text": "Tim Cook and Tim Cook.",
            "entities": [["Tim Cook", "person"]],
            "json_structures": [{"o": {"a": "Tim", "b": ["Cook"]}}],
            "relations": [{"relation": "r", "head": "Tim", "tail": "Cook"}],
            "label": "x",
        }
    ]
    info = infer_tasks(rows)
    res = [
        {
            "entities": {
                "person": [{"text": "Tim Cook", "start": 0, "end": 8}, {"text": "Cook", "start": 4, "end": 8}]
            },
            "classification": {"label": "y", "confidence": 0.9},
            "o": [{"a": {"text": "tim", "confidence": 0.9}, "b": []}],
            "relation_extraction": {"r": [{"head": {"text": "Tim"}, "tail": {"text": "Cook"}}]},
        }
    ]
    m = score_predictions(rows, res, info)
    # the mention-only gold "Tim Cook" is one gold entity (docs/reference/evaluation.md): matched once by "Tim Cook"@0;
    # "Cook"@4 is a false positive
    assert (
        m["per_entity"]["person"]["tp"] == 1
        and m["per_entity"]["person"]["fp"] == 1
        and m["per_entity"]["person"]["fn"] == 0
    )
    assert m["per_field"]["o.a"]["tp"] == 1 and m["per_field"]["o.b"]["fn"] == 1
    assert m["per_relation"]["r"]["tp"] == 1
    assert m["per_label"]["x"]["fn"] == 1 and m["per_label"]["y"]["fp"] == 1
    # overall micro: tp = 1 + 1 + 1 = 3; fp = 1 + 1 = 2; fn = 1 + 1 = 2
    assert (m["precision"], m["recall"]) == (0.6, 0.6)


def test_synthetic_is_deterministic_and_valid():
    a = synthetic.generate(50, seed=3)
    assert a == synthetic.generate(50, seed=3)
    from gliner2.training.data import InputExample  # noqa: F401  (the trainer validates the same rows)

    rows = synthetic.to_sift_rows(
        [r for r in a if not any(c.get("multi_label") for c in r["output"].get("classifications", []))]
    )
    # rows with different head sets can still be converted head by head
    for r in rows:
        convert([r], infer_tasks([r]))


def test_split_is_deterministic():
    tr, va = split(list(range(20)), 0.2, seed=1)
    assert len(va) == 4 and sorted(tr + va) == list(range(20))
    assert split(list(range(20)), 0.2, seed=1) == (tr, va)


def test_one_label_classification_beside_entities_is_left_out_with_a_warning():
    rows = [
        {
            "text": "Ada Lovelace wrote it.",
            "entities": [{"text": "Ada Lovelace", "label": "person"}],
            "label": "normal",
        },
        {"text": "Alan Turing read it.", "entities": [{"text": "Alan Turing", "label": "person"}], "label": "normal"},
    ]
    info = require_trainable(infer_tasks(rows))
    assert info.heads == ["entities"] and info.class_labels == []
    assert "classifications" not in info.schema()
    assert len(info.warnings) == 1 and "only 'normal'" in info.warnings[0] and "(entities)" in info.warnings[0]
    records = convert(rows, info)
    assert all("classifications" not in r["output"] for r in records)


def test_one_label_classification_alone_is_a_dataset_error():
    with pytest.raises(DatasetError, match="at least two distinct labels"):
        require_trainable(infer_tasks([{"text": "a", "label": "x"}, {"text": "b", "label": "x"}]))
    with pytest.raises(DatasetError, match="'labels' column holds only 'x'"):
        require_trainable(infer_tasks([{"text": "a", "labels": ["x"]}, {"text": "b", "labels": []}]))
    assert require_trainable(infer_tasks([{"text": "a", "label": "x"}, {"text": "b", "label": "y"}])).heads == [
        "classification"
    ]
    assert require_trainable(infer_tasks([{"text": "a", "labels": ["x"]}, {"text": "b", "labels": ["y"]}])).heads == [
        "classification"
    ]
    # scoring is not training: a few rows with one label are scored as they are
    assert infer_tasks([{"text": "a", "label": "x"}]).heads == ["classification"]
