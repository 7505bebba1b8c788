"""Offline build tools: the base models (sift/gliner2-mini-v1, the SmolLM2 decoder) and parity fixtures."""
