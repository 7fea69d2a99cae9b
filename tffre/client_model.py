"""A Keras model as client work sees it: named outputs, its loss, and TFF-style metrics.

TFF's ``from_keras_model`` computes one loss on one output. The algorithms of
the RE papers need more: FedCMC, MOON and FedRS read the model's ``features``
as well as its ``logits``, and an objective may replace the cross-entropy. So
a :class:`ClientModel` calls the Keras model once per batch and hands every
named output to the algorithm's objective (:mod:`tffre.definition`).

The metrics are TFF's: the user's Keras metrics on the main output, then
``loss`` (the objective's value, a mean weighted by batch size, as TFF's
loss metric), ``num_examples`` and ``num_batches``; their variables are the
unfinalized values clients upload and the server sums.
"""

import collections

import tensorflow as tf
from keras.src.engine import input_spec as input_spec_lib
from tensorflow_federated.python.learning.metrics import counters

# The output the loss and the metrics read, when the model returns a dict.
MAIN_OUTPUTS = ("logits", "predictions", "probabilities")


class ClientModel:
    """A Keras model, its loss and its metrics (see the module docstring).

    Args:
      keras_model: a ``tf.keras.Model`` returning a tensor or a dict of named
        tensors (then one of :data:`MAIN_OUTPUTS` is the main output).
      loss: the Keras loss on the main output (instance or no-arg class).
      input_spec: the (x, y) element spec of one batch.
      metrics: no-arg callables returning Keras metrics.
    """

    def __init__(self, keras_model, *, loss, input_spec, metrics=()):
        self.keras_model = keras_model
        self.loss_fn = loss() if isinstance(loss, type) else loss
        self.input_spec = input_spec
        self.metrics = [m() for m in metrics] + [
            tf.keras.metrics.Mean("loss"), counters.NumExamplesCounter(),
            counters.NumBatchesCounter()]

    @property
    def x_spec(self):
        """The spec of one batch's model inputs: ``input_spec``'s x."""
        spec = self.input_spec
        return spec[0] if isinstance(spec, (tuple, list)) else spec["x"]

    def check_input_spec(self):
        """Raises ValueError if the Keras model cannot consume ``input_spec`` batches.

        A functional model's inputs are compared with the spec statically, by the check Keras
        itself runs when the model is called (building a second model to call would cost
        seconds for a transformer); any other model is traced once on the spec.
        """
        x_spec = self.x_spec
        model = self.keras_model
        try:
            if getattr(model, "_is_graph_network", False) and model.input_spec is not None:
                input_spec_lib.assert_input_compatibility(model.input_spec, x_spec, model.name)
            else:
                tf.function(lambda x: model(x, training=False),
                            autograph=False).get_concrete_function(x_spec)
        except Exception as err:  # Keras raises several types for shape mismatches.
            raise ValueError(f"the model from model_fn cannot take inputs of input_spec "
                             f"x={x_spec}: {str(err).splitlines()[0]}") from err

    @property
    def trainable_variables(self):
        return self.keras_model.trainable_variables

    @property
    def non_trainable_variables(self):
        return self.keras_model.non_trainable_variables

    def output_shapes(self):
        """{output name: static shape} of the model's named outputs (batch dimension first)."""
        out = self.keras_model.output
        if isinstance(out, dict):
            return collections.OrderedDict((k, tuple(v.shape)) for k, v in out.items())
        return collections.OrderedDict(predictions=tuple(out.shape))

    def outputs(self, x, training=True):
        """The model's outputs as a dict; a single tensor is named ``predictions``."""
        out = self.keras_model(x, training=training)
        if isinstance(out, dict):
            return out
        return collections.OrderedDict(predictions=out)

    @staticmethod
    def main_output(outputs):
        """The output the loss and the metrics read."""
        for key in MAIN_OUTPUTS:
            if key in outputs:
                return outputs[key]
        raise ValueError(f"the model's outputs {sorted(outputs)} name none of "
                         f"{', '.join(MAIN_OUTPUTS)}, so no loss can be applied")

    def model_loss(self, y, outputs):
        """The Keras loss on the main output plus the model's own (regularization) losses."""
        return tf.add_n([self.loss_fn(y, self.main_output(outputs))] + self.keras_model.losses)

    def row_mask(self, y):
        """The mask of real output rows the loss reads off the targets ``y`` (a loss with a
        ``row_mask(y)`` method: :class:`tffre.models.document_model.DocRELoss`'s pair mask), or None."""
        mask = getattr(self.loss_fn, "row_mask", None)
        return None if mask is None else mask(y)

    def update_metrics(self, y, outputs, loss):
        """Adds one batch to the metrics; ``loss`` is the objective's value on it."""
        main = self.main_output(outputs)
        n = tf.shape(main)[0]
        for metric in self.metrics[:-3]:
            metric.update_state(y, main)
        self.metrics[-3].update_state(loss, tf.cast(n, tf.float32))
        self.metrics[-2].update_state(y)
        self.metrics[-1].update_state(y)
        return n

    def get_metrics(self):
        return self.metrics

    def reset_metrics(self):
        for metric in self.metrics:
            metric.reset_state()

    def report_local_unfinalized_metrics(self):
        """{metric name: [its variables' values]}: what the server sums over clients."""
        return collections.OrderedDict(
            (m.name, [v.read_value() for v in m.variables]) for m in self.metrics)

    def statistics_indices(self):
        """Indices into ``non_trainable_variables`` of normalisation statistics (BatchNorm moving
        means and variances).

        They change in local training (not by gradient), so clients upload them and the
        server averages them like the model (PyTorch FedAvg averages a ``state_dict``'s
        running statistics too); every other non-trainable weight (a frozen embedding,
        FedCB's classifier) is constant.
        """
        mine = set()
        for layer in self.keras_model.submodules:
            if isinstance(layer, tf.keras.layers.BatchNormalization):
                mine.update(id(v) for v in (layer.moving_mean, layer.moving_variance))
        return tuple(i for i, v in enumerate(self.non_trainable_variables) if id(v) in mine)

    def weights(self):
        """The model's variables as ``tff.learning.models.ModelWeights`` (trainable, non-trainable)."""
        from tffre.types_util import ModelWeights
        return ModelWeights(trainable=list(self.trainable_variables),
                            non_trainable=list(self.non_trainable_variables))
