"""Write a PEFT LoRA adapter of a llama-architecture model as a llama.cpp GGUF LoRA adapter.

Layout follows llama.cpp's ``convert_lora_to_gguf.py``: ``general.type = adapter``, ``adapter.type = lora``,
``adapter.lora.alpha``; tensors ``blk.N.<tensor>.weight.lora_a`` ([r, in]) and ``...lora_b`` ([out, r]).
q/k projections are stored permuted in llama GGUF files (rotary layout), so ``lora_b`` of q_proj/k_proj is
permuted the same way (P·(B·A) = (P·B)·A). Serve with llama.cpp / node-llama-cpp on top of the base GGUF.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np


def permute(w: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """llama.cpp ``LlamaModel.permute`` (HF -> GGUF row order for q/k)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<mod>.+)\.lora_(?P<ab>[AB])(?:\.default)?\.weight$")


def export_lora_gguf(adapter_dir: Path, base_config: dict[str, Any], out_path: Path) -> dict[str, Any]:
    import gguf
    from safetensors.numpy import load_file

    adapter_dir = Path(adapter_dir)
    acfg = json.loads((adapter_dir / "adapter_config.json").read_text())
    if acfg.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"not a LoRA adapter: {acfg.get('peft_type')}")
    if base_config.get("model_type") not in ("llama", None):
        raise ValueError(f"GGUF LoRA export supports llama models only (got {base_config.get('model_type')})")
    state = load_file(str(adapter_dir / "adapter_model.safetensors"))
    n_layers = int(base_config["num_hidden_layers"])
    n_head = int(base_config["num_attention_heads"])
    n_kv = int(base_config.get("num_key_value_heads", n_head))
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, n_layers)

    pairs: dict[str, dict[str, np.ndarray]] = {}
    for key, t in state.items():
        m = _KEY.match(key)
        if not m:
            raise ValueError(f"unexpected adapter tensor {key}")
        pairs.setdefault(m.group("mod"), {})[m.group("ab")] = t.astype(np.float32)

    writer = gguf.GGUFWriter(str(out_path), arch=gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(acfg["lora_alpha"]))
    written = 0
    for mod, ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise ValueError(f"incomplete LoRA pair for {mod}")
        name = tmap.get_name(mod + ".weight", try_suffixes=(".weight",))
        if name is None:
            raise ValueError(f"no GGUF name for {mod}")
        a, b = ab["A"], ab["B"]
        if mod.endswith("self_attn.q_proj"):
            b = permute(b, n_head, n_head)
        elif mod.endswith("self_attn.k_proj"):
            b = permute(b, n_head, n_kv)
        writer.add_tensor(name + ".lora_a", np.ascontiguousarray(a))
        writer.add_tensor(name + ".lora_b", np.ascontiguousarray(b))
        written += 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {"file": out_path.name, "pairs": written, "alpha": float(acfg["lora_alpha"]), "r": int(acfg["r"])}
