"""JSON files tffre writes and reads: strict on the way out, one-line errors on the way in."""

import json
import math
import os

import numpy as np


def json_safe(value):
    """``value`` as :func:`write_json` writes it: tuples as lists, numpy scalars as Python
    numbers, NaN and infinities as None."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if getattr(value, "json_as_text", False):   # a typed setting written as its flag's text
        return str(value)
    return value


def write_json(path, obj):
    """Writes ``obj`` as strict JSON (NaN and infinities become null); returns ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(json_safe(obj), f, indent=2, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    return path


def read_json_object(path, error=ValueError):
    """Reads a file holding one JSON object; raises ``error`` with a one-line message naming it."""
    if not os.path.isfile(path):
        raise error(f"file not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise error(f"{path}: not valid JSON ({' '.join(str(err).split())})") from None
    if not isinstance(obj, dict):
        raise error(f"{path}: expected a JSON object")
    return obj
