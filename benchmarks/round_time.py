"""Round-time benchmark, in one process on the same model, data and clients.

    python benchmarks/round_time.py [--rounds 15] [--out results/round_time.json]

Compares median round wall times:
  * our FedAvg vs TFF's ``build_weighted_fed_avg``    (target <= 1.15x)
  * FedPAP and FedAttS vs FedAvgS                      (target <= 1.15x; the paper: 1.48x)
  * a TFF round (our FedAvg) vs a plain Keras loop doing the same local steps
    for the same clients, then a numpy weighted mean   (target <= 1.5x)

Contenders are timed in interleaved order, after one warm-up round each, so
drifts in machine load hit all of them alike.
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_federated as tff  # noqa: E402

from tffre import build_algorithm  # noqa: E402
from tffre.data.synthetic import make_synthetic  # noqa: E402
from tffre.models import logistic_regression  # noqa: E402
from tffre.runtime import federated_runtime  # noqa: E402

LR, EPOCHS, ITERS, BATCH = 0.01, 10, 20, 10


def model_fn():
    """The synthetic-data model: multinomial logistic regression, 60 features, 10 classes."""
    return logistic_regression(60, 10)


def plain_keras_round(initial_weights):
    """The compute floor: the same local SGD steps in a compiled Keras loop, then Eq. 6.

    One ``tf.function`` per client call assigns the weights, runs the steps
    with ``dataset.reduce`` (the fastest loop form, as in our client work) and
    returns the trained weights; the mean is taken in numpy.
    """
    model = model_fn()
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()
    opt = tf.keras.optimizers.SGD(LR, jit_compile=False)
    opt.build(model.trainable_variables)

    @tf.function
    def local(weights, dataset):
        for var, value in zip(model.trainable_variables, weights):
            var.assign(value)

        def step(n, batch):
            x, y = batch
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables))
            return n + tf.cast(tf.shape(y)[0], tf.float32)

        n = dataset.reduce(tf.constant(0.0), step)
        return [tf.identity(v) for v in model.trainable_variables], n

    weights = [tf.constant(w) for w in initial_weights]

    def run(datasets):
        total, acc = 0.0, [np.zeros(w.shape, np.float32) for w in weights]
        for ds in datasets:
            trained, n = local(weights, ds.repeat(EPOCHS).take(ITERS))
            n = float(n)
            total += n
            acc = [a + n * w.numpy() for a, w in zip(acc, trained)]
        return [a / total for a in acc]
    return run


def main(argv=None):
    """Runs the benchmark and prints medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", default="results/round_time.json")
    args = parser.parse_args(argv)

    data = make_synthetic(0.5, 0.5, seed=0)
    clients = data.client_ids[:10]
    datasets = [data.client_dataset(c, batch_size=BATCH) for c in clients]
    spec = data.element_spec()
    loss = tf.keras.losses.SparseCategoricalCrossentropy()
    common = dict(loss=loss, input_spec=spec, num_epochs=EPOCHS, num_iters=ITERS)

    contenders = {}
    with federated_runtime():
        for name, kw in [("fedavg", dict(learning_rate=LR)), ("fedavgs", {}),
                         ("fedpap", dict(mu=0.03, stepsize=4.0)), ("fedatts", dict(stepsize=4.0))]:
            process = build_algorithm(name, model_fn, **common, **kw)
            contenders[name] = (process, process.initialize(), datasets)
        tff_process = tff.learning.algorithms.build_weighted_fed_avg(
            lambda: tff.learning.models.from_keras_model(model_fn(), loss=loss, input_spec=spec),
            client_optimizer_fn=tff.learning.optimizers.build_sgdm(LR),
            server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0))
        # TFF's client work runs one pass over its dataset: give it the same steps.
        contenders["tff_fedavg"] = (tff_process, tff_process.initialize(),
                                    [ds.repeat(EPOCHS).take(ITERS) for ds in datasets])
        floor = plain_keras_round(model_fn().get_weights())

        times = {name: [] for name in list(contenders) + ["plain_keras"]}
        for rnd in range(args.rounds + 1):
            for name, (process, state, ds) in contenders.items():
                start = time.perf_counter()
                state = process.next(state, ds).state
                elapsed = time.perf_counter() - start
                contenders[name] = (process, state, ds)
                if rnd:
                    times[name].append(elapsed)
            start = time.perf_counter()
            floor(datasets)
            if rnd:
                times["plain_keras"].append(time.perf_counter() - start)

    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = {"fedavg / tff_fedavg (<= 1.15)": med["fedavg"] / med["tff_fedavg"],
              "fedpap / fedavgs (<= 1.15; paper 1.48)": med["fedpap"] / med["fedavgs"],
              "fedatts / fedavgs": med["fedatts"] / med["fedavgs"],
              "fedavg (TFF round) / plain Keras loop (<= 1.5)": med["fedavg"] / med["plain_keras"]}
    print(f"median round time over {args.rounds} rounds, 10 clients x {ITERS} local steps:")
    for k, v in med.items():
        print(f"  {k:<12} {v * 1000:8.1f} ms")
    print("ratios:")
    for k, v in ratios.items():
        print(f"  {k:<48} {v:5.2f}")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"median_seconds": med, "ratios": ratios, "rounds": args.rounds,
                   "devices": [d.name for d in tf.config.list_physical_devices()]}, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
