"""Encoder (GLiNER2 span model) training: the training loop, its classification loss, prompt budgets, sampling."""
