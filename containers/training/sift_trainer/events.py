"""Structured JSON event lines on stdout: the protocol every trainer process speaks to the service."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

_EVENTS = None  # stream that carries the JSON event lines (the real stdout once claimed)


def claim_stdout() -> None:
    """Reserve stdout for JSON event lines: anything else written to stdout (library prints, C-level
    output) is redirected to stderr, so every stdout line is one JSON object."""
    global _EVENTS
    if _EVENTS is not None:
        return
    sys.stdout.flush()
    _EVENTS = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def emit(event: str, **fields: Any) -> None:
    """Write one structured JSON log line to stdout (the service parses these)."""
    rec = {"event": event, "ts": round(time.time(), 3)}
    rec.update(fields)
    out = _EVENTS or sys.stdout
    out.write(json.dumps(jsonable(rec), ensure_ascii=False) + "\n")
    out.flush()


def jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return v
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if hasattr(v, "item"):
        try:
            return jsonable(v.item())
        except Exception:  # noqa: BLE001, S110 - no scalar inside: fall through to the generic forms below
            pass
    if isinstance(v, Path):
        return str(v)
    return str(v)
