"""The packed record protocol's decoder fuzzed (hypothesis): whatever bytes a site sends, the
server's decoding either gives arrays that the round's spec check takes or refuses, or raises
the protocol's one error (:class:`tffre.deploy.protocol.ProtocolError`): never an IndexError,
a struct.error, a MemoryError from a length an index claims, or a hang.

Fixed examples, derandomized (the same inputs every run), no example database; each test
prints how many inputs it tried."""

import collections
import io
import json
import time

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tffre.deploy import protocol
from tffre.deploy.protocol import ProtocolError, pack, unpack
from tffre.federation.split_round import MessageError, from_arrays

#: A round's upload spec (the model's delta, its weight, the excluded flag).
SPEC = {"excluded": tf.TensorSpec([], tf.int32),
        "model": {"update": [tf.TensorSpec([3, 2], tf.float32), tf.TensorSpec([2], tf.float32)],
                  "weight": tf.TensorSpec([], tf.float32)}}
VALID = collections.OrderedDict([
    ("excluded", np.int32(0)),
    ("model/update/0", np.arange(6, dtype=np.float32).reshape(3, 2)),
    ("model/update/1", np.array([0.5, -1.0], np.float32)),
    ("model/weight", np.float32(8.0))])
INDEX, PACKED = pack(VALID)
PACKED = PACKED.tobytes()

FUZZ = settings(max_examples=1000, deadline=1000, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: The longest one decoding may take (an index that claims a huge array is refused by its
#: size, not by reading or allocating it).
SLOWEST = 0.5

tried = collections.Counter()


def decode_and_check(index, packed, what):
    """The property: ``unpack`` gives arrays, which ``from_arrays`` takes or refuses with a
    MessageError, or it raises ProtocolError; anything else fails the test."""
    tried[what] += 1
    start = time.perf_counter()
    try:
        arrays = unpack(index, packed)
    except ProtocolError as err:
        assert str(err).startswith("packed arrays: ") and "\n" not in str(err)
        return "refused"
    finally:
        assert time.perf_counter() - start < SLOWEST
    assert isinstance(arrays, collections.OrderedDict)
    assert all(isinstance(v, np.ndarray) and v.dtype.kind in "biufcSU" for v in arrays.values())
    try:
        upload = from_arrays(arrays, SPEC, "upload")
    except MessageError:
        return "does not fit"
    assert set(arrays) == set(VALID)
    assert tf.nest.flatten(upload)[1].shape == (3, 2)
    return "fits"


def report(capsys, what):
    with capsys.disabled():
        print(f"\n{what}: {tried[what]} inputs tried", flush=True)


def test_the_valid_record_decodes_to_the_upload():
    arrays = unpack(INDEX, PACKED)
    assert list(arrays) == list(VALID)
    for name, value in VALID.items():
        np.testing.assert_array_equal(arrays[name], value)
        assert arrays[name].dtype == value.dtype and arrays[name].shape == np.shape(value)
    assert decode_and_check(INDEX, PACKED, "valid") == "fits"


# Each refusal the decoder names, by hand (the fuzz below only requires the error's type).
@pytest.mark.parametrize("index,packed,why", [
    (INDEX, PACKED[:-3], "runs past the 37 bytes sent (truncated)"),
    (INDEX, PACKED + b"\0" * 5,
     "5 bytes beyond what the index names (its last part is 'model/weight') (oversized)"),
    (b"[[\"excluded\", \"<i4\"", PACKED, "the index does not parse as JSON"),
    (b"\xff\xfe", PACKED, "the index does not parse as JSON (UnicodeDecodeError)"),
    (b"[" * 100000, PACKED, "the index does not parse as JSON (RecursionError)"),
    (b'{"a": 1}', PACKED, "the index is not a list"),
    (b'[["x", "|O", [1]]]', PACKED, "'x' has dtype '|O', not a number's"),
    (b'[["x", "<f4,<i4", [1]]]', PACKED, "not a number's"),
    (b'[["x", "<f4", [-1]]]', PACKED, "'x' has shape [-1]"),
    (b'[["x", "<f4", [true]]]', PACKED, "'x' has shape [True]"),
    (b'[["x", "<f8", [1099511627776, 1099511627776]]]', PACKED, "(truncated)"),
    (b'[["x", "<f4", [0, 100000000000000000000000]]]', b"", "which numpy cannot hold"),
    (b'[["x", "<i4", []], ["x", "<i4", []]]', PACKED[:8], "'x' is in the index twice"),
    (b'[["x", "<i4"]]', PACKED, "index entry 0 is not [name, dtype, shape]"),
], ids=["truncated", "oversized", "cut-json", "not-utf8", "deep-json", "not-a-list",
        "object-dtype", "structured-dtype", "negative-size", "bool-size", "huge-claim",
        "huge-zero-size", "name-twice", "short-entry"])
def test_each_malformed_record_is_refused_in_one_line(index, packed, why):
    with pytest.raises(ProtocolError) as err:
        unpack(index, packed)
    assert why in str(err.value), str(err.value)


@FUZZ
@given(st.binary(max_size=600), st.binary(max_size=600))
def fuzz_arbitrary_bytes(index, packed):
    decode_and_check(index, packed, "arbitrary bytes")


def test_arbitrary_bytes(capsys):
    fuzz_arbitrary_bytes()
    report(capsys, 'arbitrary bytes')


NAMES = st.sampled_from(list(VALID) + ["model/update/2", "", "x"])
DTYPES = st.sampled_from(["<f4", "<f8", "<i4", "|b1", "|u1", ">f4", "=f4", "<c8", "|S3", "<U2",
                          "|O", "<U0", "V8", "<f4,<i4", "(2,)<f4", "float32", 7]) | st.text(
    max_size=6)
DIMS = st.integers(0, 4) | st.integers(-3, 2 ** 70) | st.sampled_from([2 ** 31, 2 ** 63, 0])
SHAPES = st.lists(DIMS, max_size=4) | st.sampled_from([[1] * 33, [0] * 40, [2 ** 64] * 3])
ENTRY = st.tuples(NAMES, DTYPES, SHAPES).map(list) | st.lists(NAMES | DIMS, max_size=4)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4) |
                    st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=12)


@FUZZ
@given(st.lists(ENTRY, max_size=6) | JSON, st.binary(max_size=200) | st.sampled_from([PACKED]))
def fuzz_indices_of_arbitrary_entries(entries, packed):
    index = json.dumps(entries).encode()
    decode_and_check(index, packed, "indices of arbitrary entries")


def test_indices_of_arbitrary_entries(capsys):
    fuzz_indices_of_arbitrary_entries()
    report(capsys, 'indices of arbitrary entries')


def mutate(data, edits):
    """``data`` with each (kind, position, value) edit: a byte set, a byte cut, bytes put in."""
    data = bytearray(data)
    for kind, position, value in edits:
        at = position % (len(data) + 1)
        if kind == "set" and data:
            data[min(at, len(data) - 1)] = value[0] if value else 0
        elif kind == "cut":
            del data[at:at + 1 + len(value)]
        else:
            data[at:at] = value
    return bytes(data)


EDITS = st.lists(st.tuples(st.sampled_from(["set", "cut", "put"]), st.integers(0, 10 ** 4),
                           st.binary(max_size=8)), min_size=1, max_size=5)


@FUZZ
@given(st.just([]) | EDITS, st.just([]) | EDITS, st.integers(-40, 40))
def fuzz_mutated_valid_records(index_edits, packed_edits, resize):
    packed = mutate(PACKED, packed_edits)
    packed = packed[:len(packed) + resize] if resize < 0 else packed + bytes(range(resize))
    decode_and_check(mutate(INDEX, index_edits), packed, "mutated valid records")


def test_mutated_valid_records(capsys):
    fuzz_mutated_valid_records()
    report(capsys, 'mutated valid records')


@FUZZ
@given(st.sampled_from(list(VALID)), st.sampled_from(["dtype", "shape", "name"]),
       DTYPES, SHAPES, NAMES)
def fuzz_valid_records_with_one_entry_changed(name, part, dtype, shape, other):
    entries = json.loads(INDEX)
    entry = next(e for e in entries if e[0] == name)
    entry[{"name": 0, "dtype": 1, "shape": 2}[part]] = {"name": other, "dtype": dtype,
                                                        "shape": shape}[part]
    decode_and_check(json.dumps(entries).encode(), PACKED, "valid records with one entry changed")


def test_valid_records_with_one_entry_changed(capsys):
    fuzz_valid_records_with_one_entry_changed()
    report(capsys, 'valid records with one entry changed')


# What the server reads off the wire is a Flower reply: each ``Array``'s .npy bytes are
# untrusted too (numpy's np.load allocates what its header claims). reply_of never raises.
@settings(FUZZ, max_examples=500)
@given(st.sampled_from(["index", "packed"]), EDITS, st.sampled_from(["numpy.ndarray", "torch"]))
def fuzz_flower_replies_with_mutated_arrays(which, edits, stype):
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
    tried["Flower replies with mutated arrays"] += 1
    index = Array(np.frombuffer(INDEX, np.uint8))
    packed = Array(np.frombuffer(PACKED, np.uint8))
    target = index if which == "index" else packed
    changed = Array(dtype=target.dtype, shape=target.shape, stype=stype,
                    data=mutate(target.data, edits))
    arrays = {"index": changed if which == "index" else index,
              "packed": changed if which == "packed" else packed}
    content = RecordDict({protocol.CONFIG: ConfigRecord({"site": "b", "round": 1}),
                          protocol.ARRAYS: ArrayRecord(collections.OrderedDict(
                              (k, arrays[k]) for k in ("index", "packed")))})
    reply = protocol.reply_of(Message(content, dst_node_id=1, message_type="train"))
    assert reply.config == {"site": "b", "round": 1} and not reply.error
    if reply.malformed:
        assert reply.arrays is None and reply.malformed.startswith("packed arrays: ")
    else:
        try:
            from_arrays(reply.arrays, SPEC, "upload")
        except MessageError:
            pass


def test_flower_replies_with_mutated_arrays(capsys):
    fuzz_flower_replies_with_mutated_arrays()
    report(capsys, 'Flower replies with mutated arrays')


def test_the_fuzz_tried_its_inputs(capsys):
    """Run after the fuzz tests above (file order): their total."""
    if len(tried) < 6:
        pytest.skip("the fuzz tests did not all run in this process")
    with capsys.disabled():
        print(f"\nin all: {sum(tried.values())} inputs tried", flush=True)
    assert sum(tried.values()) >= 4 * FUZZ.max_examples + 500


def test_a_huge_npy_header_is_refused_before_anything_is_allocated():
    from flwr.app import Array
    from numpy.lib import format as npy
    stream = io.BytesIO()
    npy.write_array_header_1_0(stream, {"descr": "|u1", "fortran_order": False,
                                        "shape": (999999999999999,)})
    array = Array(dtype="|u1", shape=(4,), stype="numpy.ndarray",
                  data=stream.getvalue() + b"\0" * 4)
    with pytest.raises(ProtocolError, match="claims 999999999999999 bytes and holds 4"):
        protocol.array_of(array, "packed values")
    with pytest.raises(MemoryError):   # what Flower's own reading (np.load) does with it
        array.numpy()
