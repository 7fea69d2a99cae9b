"""Helpers on TFF types: byte counts for the communication metrics, and TFF values as Python."""

import collections

import numpy as np
import tensorflow_federated as tff

ModelWeights = tff.learning.models.ModelWeights


def type_nbytes(type_spec):
    """Returns the number of bytes a value of ``type_spec`` occupies on the wire.

    Counts each tensor as ``itemsize * num_elements``; placements are ignored
    (a federated type counts its member once). Unknown dimensions are an error,
    since a byte count would then be a guess.
    """
    if isinstance(type_spec, tff.FederatedType):
        return type_nbytes(type_spec.member)
    if isinstance(type_spec, tff.TensorType):
        if any(d is None for d in type_spec.shape):
            raise ValueError(f"cannot count bytes of a tensor with unknown shape: {type_spec}")
        return int(np.dtype(type_spec.dtype).itemsize * np.prod(type_spec.shape, dtype=np.int64))
    if isinstance(type_spec, tff.StructType):
        return sum(type_nbytes(child) for child in type_spec.children())
    raise TypeError(f"cannot count bytes of {type_spec!r}")


def spec_nbytes(structure):
    """Bytes of a value of a structure of ``tf.TensorSpec`` (the local executor's twin of
    :func:`type_nbytes`; the two agree on the same round, as a test checks)."""
    import tensorflow as tf
    total = 0
    for spec in tf.nest.flatten(structure):
        if not spec.shape.is_fully_defined():
            raise ValueError(f"cannot count bytes of a tensor with unknown shape: {spec}")
        total += spec.dtype.size * int(np.prod(spec.shape.as_list(), dtype=np.int64))
    return total


def to_py(value):
    """TFF ``Struct`` values (unnamed structs arrive so) -> Python lists/OrderedDicts, recursively."""
    if isinstance(value, tff.structure.Struct):
        names = [n for n, _ in tff.structure.iter_elements(value)]
        items = [to_py(v) for _, v in tff.structure.iter_elements(value)]
        if names and all(names):
            return collections.OrderedDict(zip(names, items))
        return items
    if isinstance(value, tff.learning.models.ModelWeights):
        return tff.learning.models.ModelWeights(to_py(value.trainable), to_py(value.non_trainable))
    if isinstance(value, collections.OrderedDict):
        return collections.OrderedDict((k, to_py(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [to_py(v) for v in value]
    return value
