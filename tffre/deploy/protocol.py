"""The federation core's messages on Flower's Message API (tffre's ServerApp and ClientApps).

The kinds and their configs are the core's (:mod:`tffre.federation.messages`); here each kind
is a Flower message type (:data:`MESSAGE_TYPES`: a hello is Flower's ``query``), each request
a ``RecordDict`` (:func:`request_content`) answered by one reply
(``Message(content, reply_to=msg)``), read back as a
:class:`tffre.federation.messages.Reply` (:func:`reply_of`).

Arrays travel in an ``ArrayRecord`` of two ``Array`` objects: their bytes packed end to end,
and an index of their paths in the round's structure
(:func:`tffre.federation.split_round.to_arrays`), dtypes and shapes. Flower stores and pulls
each ``Array`` as an object of its own, one gRPC call per hop: with one ``Array`` per weight
(60 for the benchmark's LSTM) the pulls were most of a small round's fixed cost.

With secure aggregation the ``train`` exchange is Flower's SecAgg+ protocol
instead (:mod:`tffre.deploy.secagg`): the same broadcast in FitIns form, and no
upload the server can read.
"""

import collections
import json

import numpy as np

from tffre.federation.messages import (EVALUATE, HELLO, TRAIN, Reply, constants_hash,  # noqa: F401
                                       contiguous, payload_bytes)

#: Flower's message type of each of the core's kinds (a ClientApp answers query, train and
#: evaluate messages).
MESSAGE_TYPES = {HELLO: "query", TRAIN: "train", EVALUATE: "evaluate"}
KIND_OF = {flower: kind for kind, flower in MESSAGE_TYPES.items()}
CONFIG, ARRAYS, REPLY = "config", "arrays", "reply"
#: The packed record's two arrays: the values' bytes, and the JSON index
#: [[name, dtype, shape], ...] (as uint8).
PACKED, INDEX = "packed", "index"


def arrays_record(named):
    """An ``ArrayRecord`` of an ordered {name: numpy array}, packed into two ``Array``
    objects (see the module docstring)."""
    from flwr.app import Array, ArrayRecord
    values = [contiguous(value) for value in named.values()]
    index = json.dumps([[name, value.dtype.str, list(value.shape)]
                        for name, value in zip(named, values)]).encode()
    packed = np.concatenate([value.reshape(-1).view(np.uint8) for value in values]) \
        if values else np.zeros(0, np.uint8)
    return ArrayRecord(collections.OrderedDict(
        [(INDEX, Array(np.frombuffer(index, np.uint8))), (PACKED, Array(packed))]))


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


def request_content(request):
    """The ``RecordDict`` of a :class:`tffre.federation.messages.Request`."""
    return make_content(request.config, request.arrays)


def reply_of(message):
    """The :class:`tffre.federation.messages.Reply` of a Flower reply ``Message``: its config
    and arrays, or Flower's error (the node went away, its ClientApp raised) on one line."""
    if message.has_error():
        reason = " ".join(str(message.error.reason).split())
        return Reply(error=reason or f"error code {message.error.code}")
    config, arrays = read_content(message.content)
    return Reply(config, arrays)
