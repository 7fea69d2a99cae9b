"""Centralised evaluation of the global model, as in FLCMC section 4.3.

* test accuracy: the global model on every client's test set, weighted by
  test-set size (equivalently, accuracy on the pooled test sets);
* loss: the global model's cross-entropy on all clients' training data;
* dev accuracy, when every client has a "dev" split (for choosing a round
  without looking at the test set).

This is a simulation-side measurement: the pooled arrays never enter a
federated computation.
"""

import tensorflow as tf


class GlobalModelEvaluator:
    """Evaluates ``tff.learning.models.ModelWeights`` on pooled client data.

    Args:
      model_fn: no-arg callable returning the Keras model (same architecture
        as the federated one).
      data: a :class:`tffre.data.FederatedData`.
      loss: the Keras loss used for training.
      batch_size: evaluation batch size.
    """

    def __init__(self, model_fn, data, loss, batch_size=1024):
        self.model = model_fn()
        # Per-example losses, so the pooled mean weights every example equally.
        self._per_example_loss = loss.__class__.from_config({**loss.get_config(), "reduction": "none"})
        self._test = self._dataset(*data.pooled("test"), batch_size)
        self._train = self._dataset(*data.pooled("train"), batch_size)
        self._dev = self._dataset(*data.pooled("dev"), batch_size) if data.has_split("dev") \
            else None
        self._sums = tf.function(self._sums_impl)

    @staticmethod
    def _dataset(x, y, batch_size):
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).prefetch(2)

    def _sums_impl(self, dataset):
        loss_sum = tf.constant(0.0, tf.float64)
        correct = tf.constant(0, tf.int64)
        count = tf.constant(0, tf.int64)
        for x, y in dataset:
            pred = self.model(x, training=False)
            per_example = self._per_example_loss(y, pred)
            loss_sum += tf.reduce_sum(tf.cast(per_example, tf.float64))
            labels = tf.cast(tf.reshape(y, [-1]), tf.int64)
            correct += tf.reduce_sum(tf.cast(tf.equal(tf.argmax(pred, axis=-1), labels), tf.int64))
            count += tf.shape(labels, out_type=tf.int64)[0]
        return loss_sum, correct, count

    def model_for(self, model_weights):
        """Assigns ``model_weights`` to the evaluation model and returns it (a Keras model)."""
        model_weights.assign_weights_to(self.model)
        return self.model

    def __call__(self, model_weights):
        """Returns {"test_accuracy", "train_loss"} (and "dev_accuracy") for ``model_weights``."""
        self.model_for(model_weights)
        _, correct, count = self._sums(self._test)
        loss_sum, _, train_count = self._sums(self._train)
        out = {"test_accuracy": float(correct) / max(int(count), 1),
               "train_loss": float(loss_sum) / max(int(train_count), 1)}
        if self._dev is not None:
            _, correct, count = self._sums(self._dev)
            out["dev_accuracy"] = float(correct) / max(int(count), 1)
        return out
