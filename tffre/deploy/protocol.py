"""The messages between the tffre ServerApp and its ClientApps (Flower's Message API).

Three kinds, each answered by one reply (``Message(content, reply_to=msg)``):

* ``query`` ("hello"): config ``{"job"}`` (the job without what the sites tell)
  -> config ``{"site", "labels", "entity_types", "examples", "constants"}``, or
  ``{"site", "error"}`` when the site's data cannot be used.
* ``train``: config ``{"job", "round", "constants"}`` and the arrays of the
  round's broadcast (:meth:`tffre.mapreduce.Round.prepare`), without the
  constant weights when the site already holds them -> the arrays of the upload
  and config ``{"site", "round", "constants", "seconds"}`` (or ``"error"``).
* ``evaluate``: the same config and arrays as ``train`` -> arrays of summed
  evaluation counts per held-out split (``loss/<split>``, ``count/<split>``,
  ``confusion/<split>``) and the same reply config.

``constants`` is the hash of the broadcast's constant weights (frozen
embeddings, FedCB's classifier: :meth:`tffre.execution.split_round.SplitRound.constant_paths`):
the server sends them only to a site whose replies do not name that hash, so
they reach a site once, not every round. Arrays travel in an ``ArrayRecord`` of two
``Array`` objects: their bytes packed end to end, and an index of their paths in the round's
structure (:func:`tffre.execution.split_round.to_arrays`), dtypes and shapes. Flower stores
and pulls each ``Array`` as an object of its own, one gRPC call per hop: with one ``Array``
per weight (60 for the benchmark's LSTM) the pulls were most of a small round's fixed cost.

With secure aggregation the ``train`` exchange is Flower's SecAgg+ protocol
instead (:mod:`tffre.deploy.secagg`): the same broadcast in FitIns form, and no
upload the server can read.
"""

import collections
import hashlib
import json

import numpy as np

HELLO, TRAIN, EVALUATE = "query", "train", "evaluate"
CONFIG, ARRAYS, REPLY = "config", "arrays", "reply"
#: The packed record's two arrays: the values' bytes, and the JSON index
#: [[name, dtype, shape], ...] (as uint8).
PACKED, INDEX = "packed", "index"


def arrays_record(named):
    """An ``ArrayRecord`` of an ordered {name: numpy array}, packed into two ``Array``
    objects (see the module docstring)."""
    from flwr.app import Array, ArrayRecord
    values = [_contiguous(value) for value in named.values()]
    index = json.dumps([[name, value.dtype.str, list(value.shape)]
                        for name, value in zip(named, values)]).encode()
    packed = np.concatenate([value.reshape(-1).view(np.uint8) for value in values]) \
        if values else np.zeros(0, np.uint8)
    return ArrayRecord(collections.OrderedDict(
        [(INDEX, Array(np.frombuffer(index, np.uint8))), (PACKED, Array(packed))]))


def _contiguous(value):
    # np.ascontiguousarray would turn a scalar into shape [1].
    value = np.asarray(value)
    return value if value.flags.c_contiguous else value.copy(order="C")


def record_arrays(record):
    """The ordered {name: numpy array} of an ``ArrayRecord`` of :func:`arrays_record` (or of
    one ``Array`` per name)."""
    if set(record) != {INDEX, PACKED}:
        return collections.OrderedDict((name, array.numpy()) for name, array in record.items())
    index = json.loads(record[INDEX].numpy().tobytes().decode())
    packed = record[PACKED].numpy()
    out, offset = collections.OrderedDict(), 0
    for name, dtype, shape in index:
        dtype = np.dtype(dtype)
        size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if offset + size > packed.size:
            raise ValueError(f"packed arrays: {name!r} runs past the {packed.size} bytes sent")
        out[name] = packed[offset:offset + size].copy().view(dtype).reshape(shape)
        offset += size
    if offset != packed.size:
        raise ValueError(f"packed arrays: {packed.size - offset} bytes beyond the index")
    return out


def payload_bytes(named):
    """Bytes of the arrays' values (what ``bytes_broadcast``/``bytes_uploaded`` count)."""
    return int(sum(np.asarray(v).nbytes for v in named.values()))


def constants_hash(named):
    """A hash of the constant arrays (names, dtypes, shapes and values); "" when none."""
    if not named:
        return ""
    digest = hashlib.sha256()
    for name, value in named.items():
        value = _contiguous(value)
        digest.update(f"{name}:{value.dtype.str}:{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()[:32]


def make_content(config, arrays=None):
    """A ``RecordDict`` of a config dict (and arrays)."""
    from flwr.app import ConfigRecord, RecordDict
    content = RecordDict({CONFIG: ConfigRecord(dict(config))})
    if arrays is not None:
        content[ARRAYS] = arrays_record(arrays)
    return content


def read_content(content):
    """(config dict, {name: array} or None) of a ``RecordDict`` of :func:`make_content`."""
    config = dict(content.config_records.get(CONFIG, {}))
    arrays = content.array_records.get(ARRAYS)
    return config, None if arrays is None else record_arrays(arrays)
