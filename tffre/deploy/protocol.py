"""The federation core's messages on Flower's Message API (tffre's ServerApp and ClientApps).

The kinds and their configs are the core's (:mod:`tffre.federation.messages`); here each kind
is a Flower message type (:data:`MESSAGE_TYPES`: a hello is Flower's ``query``), each request
a ``RecordDict`` (:func:`request_content`) answered by one reply
(``Message(content, reply_to=msg)``), read back as a
:class:`tffre.federation.messages.Reply` (:func:`reply_of`).

Arrays travel in an ``ArrayRecord`` of two ``Array`` objects: their bytes packed end to end,
and an index of their paths in the round's structure
(:func:`tffre.federation.split_round.to_arrays`), dtypes and shapes (:func:`pack`,
:func:`unpack`). Flower stores and pulls
each ``Array`` as an object of its own, one gRPC call per hop: with one ``Array`` per weight
(60 for the benchmark's LSTM) the pulls were most of a small round's fixed cost.

What a site sends is read as untrusted bytes: :func:`unpack` either returns the arrays the
index names, all of them there and nothing more, or raises :class:`ProtocolError` (one line),
never another error, and allocates nothing an index merely claims
(``tests/tffre/deploy/test_protocol_fuzz.py`` fuzzes it). Whether the arrays fit the round is
the round's check (:func:`tffre.federation.split_round.from_arrays`).

With secure aggregation the ``train`` exchange is Flower's SecAgg+ protocol
instead (:mod:`tffre.deploy.secagg`): the same broadcast in FitIns form, and no
upload the server can read.
"""

import collections
import json
import re

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


class ProtocolError(ValueError):
    """A packed record that cannot be read: its index does not parse, names a part twice or a
    type that is not a plain number, its bytes are fewer or more than the index says, or an
    ``Array``'s ``.npy`` bytes do not read (one line saying what is wrong). The one error
    :func:`unpack` and :func:`record_arrays` raise."""


#: numpy's most dimensions of an array.
MAX_DIMS = 32
#: The dtypes a packed record may name (as ``dtype.str`` writes them): booleans, integers,
#: floats and complex numbers of a byte order and size, fixed-size bytes and text. No objects
#: (a pickle), no structured or sub-array types.
_DTYPE = re.compile(r"[<>|=](?:[biufc][0-9]{1,2}|[SU][0-9]{1,6})\Z")


def pack(named):
    """(index bytes, packed uint8 array) of an ordered {name: numpy array}: the JSON index
    ``[[name, dtype, shape], ...]`` and the values' bytes end to end."""
    values = [contiguous(value) for value in named.values()]
    index = json.dumps([[name, value.dtype.str, list(value.shape)]
                        for name, value in zip(named, values)]).encode()
    packed = np.concatenate([value.reshape(-1).view(np.uint8) for value in values]) \
        if values else np.zeros(0, np.uint8)
    return index, packed


def _entry(i, entry):
    """(name, dtype, shape) of the index's ``i``-th entry; :class:`ProtocolError` otherwise."""
    if not (isinstance(entry, list) and len(entry) == 3):
        raise ProtocolError(f"packed arrays: index entry {i} is not [name, dtype, shape]")
    name, dtype, shape = entry
    if not isinstance(name, str) or not name:
        raise ProtocolError(f"packed arrays: index entry {i}'s name is not a text")
    if not isinstance(dtype, str):
        raise ProtocolError(f"packed arrays: {name!r}'s dtype is not a text")
    dtype = _checked_dtype(dtype, repr(name))
    if not (isinstance(shape, list) and len(shape) <= MAX_DIMS
            and all(type(d) is int and d >= 0 for d in shape)):   # a bool is no size
        raise ProtocolError(f"packed arrays: {name!r} has shape {str(shape)[:60]}, not a list "
                            f"of at most {MAX_DIMS} sizes >= 0")
    return name, dtype, tuple(shape)


def unpack(index, packed):
    """The ordered {name: numpy array} of :func:`pack`'s (index bytes, packed bytes or uint8
    array); :class:`ProtocolError` saying what is wrong when they do not fit together.

    Nothing is allocated before the bytes it reads are known to be there (an index that
    claims a huge array is refused by its size, in Python's integers, which do not
    overflow)."""
    try:
        raw = index.tobytes() if isinstance(index, np.ndarray) else bytes(index)
        entries = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ProtocolError(f"packed arrays: the index does not parse as JSON "
                            f"({type(err).__name__})") from None
    if not isinstance(entries, list):
        raise ProtocolError("packed arrays: the index is not a list of [name, dtype, shape]")
    packed = np.frombuffer(packed, np.uint8) if isinstance(packed, (bytes, bytearray)) \
        else np.asarray(packed)
    if packed.dtype != np.uint8 or packed.ndim != 1:
        raise ProtocolError(f"packed arrays: the values are {packed.dtype}{list(packed.shape)}, "
                            f"not bytes")
    out, offset = collections.OrderedDict(), 0
    for i, entry in enumerate(entries):
        name, dtype, shape = _entry(i, entry)
        if name in out:
            raise ProtocolError(f"packed arrays: {name!r} is in the index twice")
        size = dtype.itemsize * _size(shape)
        if offset + size > packed.size:
            raise ProtocolError(f"packed arrays: {name!r} ({dtype.str}{list(shape)}, {size} "
                                f"bytes) runs past the {packed.size} bytes sent (truncated)")
        value = packed[offset:offset + size].copy().view(dtype)
        try:
            value = value.reshape(shape)
        except (ValueError, OverflowError):   # zero values in dimensions numpy cannot hold
            raise ProtocolError(f"packed arrays: {name!r} has shape {list(shape)}, which numpy "
                                f"cannot hold") from None
        # A sender of the other byte order: the same values in this machine's.
        out[name] = value if dtype.isnative else value.astype(dtype.newbyteorder("="))
        offset += size
    if offset != packed.size:
        last = f" (its last part is {next(reversed(out))!r})" if out else ""
        raise ProtocolError(f"packed arrays: {packed.size - offset} bytes beyond what the index "
                            f"names{last} (oversized)")
    return out


def arrays_record(named):
    """An ``ArrayRecord`` of an ordered {name: numpy array}, packed into two ``Array``
    objects (see the module docstring)."""
    from flwr.app import Array, ArrayRecord
    index, packed = pack(named)
    return ArrayRecord(collections.OrderedDict(
        [(INDEX, Array(np.frombuffer(index, np.uint8))), (PACKED, Array(packed))]))


def _checked_dtype(dtype, name):
    """``dtype`` (a dtype or its text) when it is a number's (:data:`_DTYPE`); else
    :class:`ProtocolError` naming ``name``."""
    text = dtype if isinstance(dtype, str) else getattr(dtype, "str", None)
    if not isinstance(text, str) or not _DTYPE.match(text):
        raise ProtocolError(f"packed arrays: {name} has dtype {str(dtype)[:40]!r}, not a "
                            f"number's (e.g. '<f4')")
    try:
        dtype = np.dtype(text)
    except TypeError:   # a size numpy has no such type of ('<f3')
        raise ProtocolError(f"packed arrays: {name} has dtype {text!r}, which numpy does not "
                            f"know") from None
    if dtype.itemsize == 0:
        raise ProtocolError(f"packed arrays: {name} has the empty dtype {dtype.str!r}")
    return dtype


def _size(shape):
    """The number of values of ``shape`` (Python's integers: no overflow)."""
    count = 1
    for d in shape:
        count *= d
    return count


#: The header ``np.save`` writes (``numpy.lib.format``): a dict's repr, its keys sorted.
_NPY_HEADER = re.compile(r"\{'descr': '([^']{1,40})', 'fortran_order': (True|False), "
                         r"'shape': \(((?:[0-9]{1,30}, ?){0,32}[0-9]{0,30})\), \} *\n\Z")


def _npy_header(data, what):
    """(dtype text, Fortran order, shape, where the values start) of ``.npy`` bytes, read by
    hand: numpy's reader evaluates the header as Python and raises several errors on a
    broken one (tokenize's, struct's, a SyntaxError)."""
    if len(data) < 10 or data[:6] != b"\x93NUMPY" or data[6] not in (1, 2, 3):
        raise ProtocolError(f"packed arrays: the {what} is not .npy bytes")
    width = 2 if data[6] == 1 else 4
    length = int.from_bytes(data[8:8 + width], "little")
    start = 8 + width + length
    if len(data) < start:
        raise ProtocolError(f"packed arrays: the {what}'s .npy header runs past its bytes")
    try:
        header = data[8 + width:start].decode("utf-8" if data[6] == 3 else "latin1")
    except UnicodeDecodeError:
        raise ProtocolError(f"packed arrays: the {what}'s .npy header is not text") from None
    found = _NPY_HEADER.match(header.rstrip(" \n") + "\n") if length <= 10000 else None
    if found is None:
        raise ProtocolError(f"packed arrays: the {what}'s .npy header does not read")
    dtype, fortran, dims = found.groups()
    shape = tuple(int(d) for d in dims.replace(" ", "").split(",") if d)
    return dtype, fortran == "True", shape, start


def array_of(array, what):
    """The numpy array one of Flower's ``Array`` objects holds, read from its ``.npy`` bytes
    without trusting them: the header's dtype must be a number's and its shape must fit the
    bytes there, before anything is allocated (``Array.numpy()``, numpy's ``np.load``,
    allocates what a header claims first); :class:`ProtocolError` naming ``what``
    otherwise."""
    data = getattr(array, "data", None)
    if getattr(array, "stype", None) != "numpy.ndarray" or not isinstance(data, bytes):
        raise ProtocolError(f"packed arrays: the {what} is not a numpy array's bytes")
    dtype, fortran, shape, start = _npy_header(data, what)
    dtype = _checked_dtype(dtype, f"the {what}")
    if len(shape) > MAX_DIMS or not all(type(d) is int and d >= 0 for d in shape):
        raise ProtocolError(f"packed arrays: the {what} has shape {str(shape)[:60]}")
    size, have = dtype.itemsize * _size(shape), len(data) - start
    if size != have:
        raise ProtocolError(f"packed arrays: the {what} claims {size} bytes and holds {have}")
    try:
        value = np.frombuffer(data, dtype, count=_size(shape), offset=start)
        return value.reshape(shape, order="F" if fortran else "C")
    except (ValueError, OverflowError):   # zero values in dimensions numpy cannot hold
        raise ProtocolError(f"packed arrays: the {what} has shape {list(shape)}, which numpy "
                            f"cannot hold") from None


def _bytes_of(array, what):
    """The uint8 values of one of a packed record's two ``Array`` objects."""
    value = array_of(array, what)
    if value.dtype != np.uint8 or value.ndim != 1:
        raise ProtocolError(f"packed arrays: the {what} is {value.dtype}{list(value.shape)}, "
                            f"not bytes")
    return value


def record_arrays(record):
    """The ordered {name: numpy array} of an ``ArrayRecord`` of :func:`arrays_record` (or of
    one ``Array`` per name); :class:`ProtocolError` when its arrays cannot be read."""
    if set(record) != {INDEX, PACKED}:
        return collections.OrderedDict((name, array_of(array, repr(name)).copy())
                                       for name, array in record.items())
    return unpack(_bytes_of(record[INDEX], "index"), _bytes_of(record[PACKED], "packed values"))


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
    and arrays, or Flower's error (the node went away, its ClientApp raised) on one line. A
    reply whose arrays cannot be read comes back with its config and ``malformed`` (the
    :class:`ProtocolError`'s line): the server leaves that site out of the round and names
    it, and goes on."""
    if message.has_error():
        reason = " ".join(str(message.error.reason).split())
        return Reply(error=reason or f"error code {message.error.code}")
    config = dict(message.content.config_records.get(CONFIG, {}))
    try:
        _, arrays = read_content(message.content)
    except ProtocolError as err:
        return Reply(config, None, malformed=str(err))
    return Reply(config, arrays)
