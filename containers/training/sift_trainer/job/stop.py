"""Graceful stop: SIGTERM/SIGINT set a flag; trainers save a checkpoint at the next step and stop."""

from __future__ import annotations

import signal
import threading
from typing import Any, Dict, Optional

_STOP = threading.Event()


class StopRequested(Exception):
    def __init__(self, checkpoint: Optional[Dict[str, Any]] = None):
        super().__init__("stop requested (SIGTERM)")
        self.checkpoint = checkpoint


def _handler(signum, frame):  # noqa: ARG001
    _STOP.set()


def install() -> None:
    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)


def stop_requested() -> bool:
    return _STOP.is_set()


def request_stop() -> None:
    _STOP.set()
