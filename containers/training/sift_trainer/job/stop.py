"""Graceful stop: SIGTERM/SIGINT set a flag; trainers save a checkpoint at the next step and stop."""

from __future__ import annotations

import signal
import threading
from typing import Any

_STOP = threading.Event()


class StopRequested(Exception):
    def __init__(self, checkpoint: dict[str, Any] | None = None):
        super().__init__("stop requested (SIGTERM)")
        self.checkpoint = checkpoint


def _handler(signum, frame):
    _STOP.set()


def install() -> None:
    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)


def stop_requested() -> bool:
    return _STOP.is_set()


def request_stop() -> None:
    _STOP.set()
