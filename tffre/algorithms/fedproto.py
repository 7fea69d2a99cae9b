"""FedProtoAvg: FedAvg plus FedProto's prototype term (the worked example of ``docs/adding-an-algorithm.md``).

FedProto (Tan et al., AAAI 2022) keeps one prototype per class, the mean
feature vector of that class, and pulls each client's features towards the
global prototypes:

    C_c^k = (1 / |D_c^k|) sum_{(x, y) in D_c^k, y = c} f(x)          (client prototype)
    C_c   = sum_k |D_c^k| C_c^k / sum_k |D_c^k|                       (global prototype)
    L_k   = CE + lambda * mean_i ||f(x_i) - C_{y_i}||^2               (client objective)

FedProto itself exchanges only prototypes; this variant also averages the
model as FedAvg does (Eq. 6 of FLCMC), so it runs on any tffre model. It uses
four parts of :class:`~tffre.definition.Definition`:

* server extras: the global prototypes and which classes have one;
* client objective: the cross-entropy plus the prototype term (a class with
  no prototype yet adds nothing);
* an extra upload: per-class feature sums and counts, one pass over the
  client's data with the trained model; summed, not averaged, so the server
  divides by the true counts;
* server work: the new prototypes (a class no client saw keeps its old one).

The features are the model's ``features`` output when it has one, else its
main output (e.g. the class probabilities of a single-output model).
"""

import collections
import dataclasses

from tffre import definition
from tffre.definition import Definition, StructSum
from tffre.hparams import non_negative_float, param
from tffre.lazy import tf


def _features(model, outputs):
    return outputs["features"] if "features" in outputs else model.main_output(outputs)


class FedProtoAvg(Definition):
    """FedAvg with FedProto's prototype regularizer (see the module docstring)."""

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        proto_weight: float = param(1.0, non_negative_float, "FedProtoAvg: the prototype "
                                    "term's weight lambda", paper="FedProto, lambda")

    def _dims(self, model):
        shapes = model.output_shapes()
        feature = shapes["features"] if "features" in shapes else shapes[
            next(k for k in ("logits", "predictions", "probabilities") if k in shapes)]
        main = model.main_output(shapes)
        return int(main[-1]), int(feature[-1])

    def initial_extras(self, model):
        num_classes, dim = self._dims(model)
        return collections.OrderedDict(prototypes=tf.zeros([num_classes, dim]),
                                       present=tf.zeros([num_classes]))

    def objective(self, ctx):
        features = _features(ctx.model, ctx.outputs)
        y = tf.cast(tf.reshape(ctx.y, [-1]), tf.int32)
        target = tf.gather(ctx.extras["prototypes"], y)
        present = tf.gather(ctx.extras["present"], y)
        distance = tf.reduce_sum(tf.square(features - target), axis=-1)
        return ctx.model_loss() + self.hparams.proto_weight * tf.reduce_mean(
            present * distance)

    def client_upload(self, ctx):
        num_classes, dim = ctx.extras["prototypes"].shape

        def add(acc, batch):
            x, y = batch
            features = _features(ctx.model, ctx.model.outputs(x, training=False))
            onehot = tf.one_hot(tf.cast(tf.reshape(y, [-1]), tf.int32), num_classes)
            return collections.OrderedDict(
                sums=acc["sums"] + tf.matmul(onehot, features, transpose_a=True),
                counts=acc["counts"] + tf.reduce_sum(onehot, axis=0))
        acc = collections.OrderedDict(sums=tf.zeros([num_classes, dim]),
                                      counts=tf.zeros([num_classes]))
        for batch in iter(ctx.dataset):
            acc = add(acc, batch)
        return acc

    def upload_aggregator(self, spec):
        return StructSum(spec)

    def server_update(self, model_weights, extras, aggregate, previous_weights, objects=None):
        counts = aggregate["counts"]
        seen = counts > 0
        mean = aggregate["sums"] / tf.maximum(counts, 1.0)[:, None]
        prototypes = tf.where(seen[:, None], mean, extras["prototypes"])
        present = tf.maximum(extras["present"], tf.cast(seen, tf.float32))
        return model_weights, collections.OrderedDict(prototypes=prototypes, present=present)
