"""File helpers: atomic JSON writes and content hashes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .events import jsonable


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(jsonable(data), f, indent=2, ensure_ascii=False)
    os.replace(tmp, path)
