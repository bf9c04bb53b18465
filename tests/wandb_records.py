"""Reads an offline W&B run back from the files wandb writes: its transaction log (``run-<id>.wandb``), whose
records are wandb's own protocol buffers (``wandb.proto.wandb_internal_pb2.Record``) in LevelDB's log format
(32 KiB blocks, each record or fragment behind a 7-byte header), after a 7-byte file header."""

from __future__ import annotations

import glob
import json
import os
import struct
import time

_FILE_HEADER = 7
_BLOCK = 32768
_RECORD_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> list[bytes]:
    assert data[:4] == b":W&B", "not a W&B transaction log"
    found, pending, position = [], b"", _FILE_HEADER
    while position + _RECORD_HEADER <= len(data):
        left_in_block = _BLOCK - position % _BLOCK
        if left_in_block < _RECORD_HEADER:  # a block's tail too short for a header is padding
            position += left_in_block
            continue
        _, length, kind = struct.unpack("<IHB", data[position:position + _RECORD_HEADER])
        chunk = data[position + _RECORD_HEADER:position + _RECORD_HEADER + length]
        position += _RECORD_HEADER + length
        if kind == _FULL:
            found.append(chunk)
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            found.append(pending + chunk)
        else:  # zeros after the last record
            break
    return found


def offline_runs(wandb_dir: str) -> list[str]:
    """The transaction logs of the offline runs under ``wandb_dir`` (W&B's ``wandb/offline-run-*`` folders)."""
    return sorted(glob.glob(os.path.join(wandb_dir, "**", "offline-run-*", "run-*.wandb"), recursive=True))


def _records(path: str, wait_s: float) -> list:
    """The records of the transaction log ``path`` once it holds the run's ``exit`` record: wandb's service process
    writes the log behind ``run.finish()``, so right after it the file can still hold its header alone."""
    from wandb.proto import wandb_internal_pb2

    deadline = time.monotonic() + wait_s
    while True:
        with open(path, "rb") as file:
            records = []
            for payload in _payloads(file.read()):
                record = wandb_internal_pb2.Record()
                record.ParseFromString(payload)
                records.append(record)
        if any(record.WhichOneof("record_type") == "exit" for record in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.05)


def read_run(path: str, wait_s: float = 30.0) -> tuple[dict, list[dict]]:
    """``(config, history)`` of the run logged in ``path``: its config as a dict, and each logged row (waiting up to
    ``wait_s`` for wandb to have written the whole run)."""
    config, history = {}, []
    for record in _records(path, wait_s):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
        elif kind == "config":
            config.update({item.key: json.loads(item.value_json) for item in record.config.update})
        elif kind == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.history.item})
    return config, history
