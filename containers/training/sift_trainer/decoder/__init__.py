"""Decoder (causal LM) training with TRL (SFT, DPO, GRPO) and the LoRA adapter's GGUF export."""
