"""A ``LearningProcess`` whose ``next`` also reports wall time and communication.

TFF computations cannot read a clock, so the round's wall seconds are measured
around the call here, in Python. Bytes come from the type signatures: each
sampled client receives the broadcast types and sends the upload types.
"""

import collections
import time

import tensorflow as tf
import tensorflow_federated as tff

from tffre.types_util import type_nbytes


class ClientDataError(ValueError):
    """A client dataset that cannot be trained on (empty, wrong element type)."""


class _MeasuredNext:
    """Callable wrapper around the composed ``next`` computation."""

    def __init__(self, computation, owner):
        self._computation = computation
        self._owner = owner

    def __getattr__(self, attr):
        return getattr(self._computation, attr)

    def __call__(self, state, client_data):
        self._owner.check_client_data(client_data)
        start = time.perf_counter()
        output = self._computation(state, client_data)
        seconds = time.perf_counter() - start
        metrics = collections.OrderedDict(output.metrics)
        n = len(client_data)
        metrics["round"] = collections.OrderedDict(
            wall_seconds=seconds, num_clients=n,
            bytes_broadcast=n * self._owner.broadcast_bytes_per_client,
            bytes_uploaded=n * self._owner.upload_bytes_per_client)
        return tff.learning.templates.LearningProcessOutput(output.state, metrics)


class MeasuredLearningProcess(tff.learning.templates.LearningProcess):
    """A composed learning process plus its name, hyperparameters and byte costs.

    ``next(state, client_datasets)`` returns TFF's metrics plus
    ``metrics['round']`` = wall_seconds, num_clients, bytes_broadcast,
    bytes_uploaded. Client datasets are checked first: an empty dataset or one
    whose element type differs from the model's ``input_spec`` raises
    :class:`ClientDataError` naming the client's position.
    """

    def __init__(self, process, *, name, hparams, broadcast_types, upload_types):
        super().__init__(process.initialize, process.next, process.get_model_weights,
                         process.set_model_weights, get_hparams_fn=process.get_hparams,
                         set_hparams_fn=process.set_hparams)
        self.name = name
        self.hparams = dict(hparams)
        self.broadcast_bytes_per_client = sum(type_nbytes(t) for t in broadcast_types)
        self.upload_bytes_per_client = sum(type_nbytes(t) for t in upload_types)
        self._data_type = process.next.type_signature.parameter[1].member
        self._measured_next = _MeasuredNext(process.next, self)

    @property
    def next(self):
        """``next(state, client_datasets)``: the composed round plus ``metrics['round']``."""
        return self._measured_next

    def check_client_data(self, client_data):
        """Raises :class:`ClientDataError` for an empty or mistyped client dataset."""
        if len(client_data) == 0:
            raise ClientDataError(f"{self.name}: a round needs at least one client dataset")
        for i, ds in enumerate(client_data):
            if not isinstance(ds, tf.data.Dataset):
                raise ClientDataError(f"{self.name}: client {i}: expected a tf.data.Dataset, "
                                      f"got {type(ds).__name__}")
            if ds.cardinality() == 0:
                raise ClientDataError(f"{self.name}: client {i}: the dataset is empty")
            got = tff.types.tensorflow_to_type(ds.element_spec)
            if not self._data_type.element.is_assignable_from(got):
                raise ClientDataError(
                    f"{self.name}: client {i}: batches of type {got} do not match the "
                    f"model's input_spec {self._data_type.element}")
