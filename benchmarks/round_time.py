"""Round-time benchmark of the executors, in one process, on three workloads.

    python benchmarks/round_time.py [--workloads logistic,lstm,minilm] [--rounds 5]
                                    [--parallel 1,2,3] [--out results/round_time.json]
    python benchmarks/round_time.py --rss minilm    # peak RSS of each executor, in subprocesses

Workloads:
  * logistic: synthetic(0.5, 0.5) logistic regression, FedAvg (SGD 0.01), 10 clients x 20 steps
    of batch 10;
  * lstm: the IMCS-shaped LSTM (embedding 64, LSTM 64, max length 16), FedAvgS (Adam), 10
    clients x 20 steps of batch 10;
  * minilm: a functional Keras model around ``TFBertModel`` from a random ``BertConfig`` of
    all-MiniLM-L6-v2's shape (6 layers, hidden 384, 22.7M parameters; no weights needed),
    sequence 64, batch 8, FedAvgS, 4 clients x 5 Adam steps.

Contenders, timed in interleaved order after one warm-up round each, so drifts in machine
load hit all alike (medians reported):
  * loop: the floor, a lean ``tf.function`` Keras step per batch, clients one after another,
    then the weighted mean (Eq. 6) in TensorFlow;
  * local: tffre's in-process executor in its three loop forms: one graph per client with a
    while loop ("while", the default, with 1, 2, ... clients in parallel threads), per-batch
    compiled steps ("steps") and one ``dataset.reduce`` graph ("reduce"); and "procs", the
    while form with 2, 3, ... clients at once in worker processes (``client_workers``);
  * tff: the same algorithm on TFF's runtime (its worker runs clients in parallel itself);
  * tff-own-fedavg: TFF's own ``build_weighted_fed_avg`` doing the same client steps.
Also reported: process build times, and the best parallelism setting per workload.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tffre import build_algorithm  # noqa: E402
from tffre.runtime import federated_runtime, peak_rss_mib  # noqa: E402


def logistic_workload():
    from tffre.data.synthetic_sets import make_synthetic
    from tffre.models import logistic_regression
    data = make_synthetic(0.5, 0.5, seed=0)
    clients = [data.client_dataset(c, batch_size=10, seed=1) for c in data.client_ids[:10]]
    return dict(model_fn=lambda: logistic_regression(60, 10), algorithm="fedavg",
                optimizer=lambda: tf.keras.optimizers.SGD(0.01), hparams=dict(learning_rate=0.01),
                clients=clients, num_epochs=10, num_iters=20)


def lstm_workload():
    from tffre.models import LSTMConfig, lstm_classifier
    rng = np.random.RandomState(0)
    clients = []
    for _ in range(10):
        n = int(rng.randint(150, 400))
        x = rng.randint(2, 354, (n, 16)).astype(np.int32)
        x[:, 10:] *= rng.rand(n, 6) > 0.5          # some padding, masked
        y = (x[:, 0] % 3 == 0).astype(np.int32)
        clients.append(tf.data.Dataset.from_tensor_slices((x, y)).batch(10))
    config = LSTMConfig(2, 16, vocab_size=354, embedding_dim=64, lstm_units=64, seed=0)
    return dict(model_fn=lambda: lstm_classifier(config),
                algorithm="fedavgs", optimizer=lambda: _self_adam(0.001),
                hparams=dict(learning_rate=0.001), clients=clients, num_epochs=10, num_iters=20)


def minilm_model_fn(seq_len=64):
    """A classifier around TFBertModel with all-MiniLM-L6-v2's shape, randomly initialised."""
    from transformers import BertConfig, TFBertModel
    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                        num_attention_heads=12, intermediate_size=1536,
                        max_position_embeddings=512)
    ids = tf.keras.Input((seq_len,), dtype=tf.int32, name="input_ids")
    mask = tf.keras.Input((seq_len,), dtype=tf.int32, name="attention_mask")
    encoder = TFBertModel(config, name="bert")
    cls = encoder(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0]
    out = tf.keras.layers.Dense(2, activation="softmax", name="classifier")(cls)
    return tf.keras.Model([ids, mask], out)


def minilm_workload():
    rng = np.random.RandomState(0)
    clients = []
    for _ in range(4):
        n = 40
        ids = rng.randint(1000, 30000, (n, 64)).astype(np.int32)
        mask = np.ones((n, 64), np.int32)
        mask[:, 48:] = rng.rand(n, 16) > 0.5
        y = rng.randint(0, 2, n).astype(np.int32)
        clients.append(tf.data.Dataset.from_tensor_slices(((ids, mask), y)).batch(8))
    return dict(model_fn=minilm_model_fn, algorithm="fedavgs",
                optimizer=lambda: _self_adam(0.0001), hparams=dict(learning_rate=0.0001),
                clients=clients, num_epochs=1, num_iters=5)


def _self_adam(lr):
    import optimizers
    return optimizers.SelfAdam(lr, jit_compile=False)


WORKLOADS = {"logistic": logistic_workload, "lstm": lstm_workload, "minilm": minilm_workload}


class LeanLoop:
    """The floor: the same local steps in a lean compiled Keras loop, clients in sequence."""

    def __init__(self, w):
        self.w = w
        self.model = w["model_fn"]()
        self.loss = tf.keras.losses.SparseCategoricalCrossentropy()
        self.opt = w["optimizer"]()
        self.opt.build(self.model.trainable_variables)
        self.sizes = [int(ds.reduce(0, lambda n, b: n + tf.shape(b[1])[0])) for ds in w["clients"]]

        @tf.function(reduce_retracing=True)
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = self.loss(y, self.model(x, training=True))
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.model.trainable_variables))

        self.step = step

    def round(self, weights):
        total = [tf.zeros_like(v) for v in weights]
        for ds, n in zip(self.w["clients"], self.sizes):
            for var, value in zip(self.model.trainable_variables, weights):
                var.assign(value)
            for var in self.opt.variables:     # a fresh optimizer per client, as tffre's default
                var.assign(tf.zeros_like(var))
            for x, y in ds.repeat(self.w["num_epochs"]).take(self.w["num_iters"]):
                self.step(x, y)
            total = [t + n * v for t, v in zip(total, self.model.trainable_variables)]
        return [t / sum(self.sizes) for t in total]


def build_contenders(name, w, parallel, only=None):
    """{contender: (round callable, build seconds)}.

    TFF first: tracing a Keras model in a graph switches Keras's layer classes
    to graph mode, which the eager models built afterwards switch back.
    """
    loss = tf.keras.losses.SparseCategoricalCrossentropy()
    spec = w["clients"][0].element_spec
    out = {}

    def add(label, **kwargs):
        if only and label not in only:
            return
        start = time.perf_counter()
        tf.keras.utils.set_random_seed(0)
        process = build_algorithm(w["algorithm"], w["model_fn"], loss=loss, input_spec=spec,
                                  num_epochs=w["num_epochs"], num_iters=w["num_iters"],
                                  **w["hparams"], **kwargs)
        state = process.initialize()
        out[label] = (lambda: process.next(state, w["clients"]), time.perf_counter() - start)

    add("tff", executor="tff")
    # TFF's own FedAvg with the same client steps (Adam or SGD), for "tff keeps its ratios".
    if not only or "tff-own-fedavg" in only:
        start = time.perf_counter()
        import tensorflow_federated as tff
        lr = w["hparams"]["learning_rate"]
        client_opt = (tff.learning.optimizers.build_sgdm(lr) if w["algorithm"] == "fedavg"
                      else tff.learning.optimizers.build_adam(lr))
        theirs = tff.learning.algorithms.build_weighted_fed_avg(
            lambda: tff.learning.models.from_keras_model(w["model_fn"](), loss=loss,
                                                         input_spec=spec),
            client_optimizer_fn=client_opt,
            server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0))
        their_state = theirs.initialize()
        capped = [ds.repeat(w["num_epochs"]).take(w["num_iters"]) for ds in w["clients"]]
        out["tff-own-fedavg"] = (lambda: theirs.next(their_state, capped),
                                 time.perf_counter() - start)
    for p in parallel:
        add(f"local-while-p{p}", executor="local", loop="while", max_parallel_clients=p)
    for p in parallel:
        if p > 1:   # clients in worker processes, each its own TF runtime
            add(f"local-procs-p{p}", executor="local", loop="while", max_parallel_clients=p,
                client_workers="processes")
    for p in parallel:
        add(f"local-steps-p{p}", executor="local", loop="steps", max_parallel_clients=p)
    add("local-reduce-p1", executor="local", loop="reduce")
    return _with_loop(out, w)


def _with_loop(out, w):
    start = time.perf_counter()
    loop = LeanLoop(w)
    weights = [v.numpy() for v in loop.model.trainable_variables]
    out["loop"] = (lambda: loop.round(weights), time.perf_counter() - start)
    return out


def bench(name, rounds, parallel, only=None):
    w = WORKLOADS[name]()
    contenders = build_contenders(name, w, parallel, only)
    times = {k: [] for k in contenders}
    for fn, _ in contenders.values():
        fn()                                   # warm-up: traces, worker start
    for _ in range(rounds):
        for k, (fn, _) in contenders.items():
            start = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    local = {k: v for k, v in med.items() if k.startswith("local")}
    best = min(local, key=local.get)
    return {"median_seconds": med, "ratio_to_loop": {k: v / med["loop"] for k, v in med.items()},
            "build_seconds": {k: b for k, (_, b) in contenders.items()},
            "best_local_setting": best, "rounds": rounds}


def rss_of(name, executor):
    """Peak RSS (MiB) of one executor running the workload, in a fresh subprocess."""
    code = (f"import sys; sys.argv=['x']; sys.path.insert(0, {os.path.dirname(__file__)!r});"
            f"import round_time as r, json; print(json.dumps(r._rss_child({name!r}, {executor!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _rss_child(name, executor):
    w = WORKLOADS[name]()
    loss = tf.keras.losses.SparseCategoricalCrossentropy()
    with federated_runtime():
        process = build_algorithm(w["algorithm"], w["model_fn"], loss=loss,
                                  input_spec=w["clients"][0].element_spec,
                                  num_epochs=w["num_epochs"], num_iters=w["num_iters"],
                                  executor=executor, **w["hparams"])
        state = process.initialize()
        for _ in range(2):
            state = process.next(state, w["clients"]).state
        rss = peak_rss_mib()
    return rss


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="logistic,lstm,minilm")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parallel", default="1,2,3")
    parser.add_argument("--only", help="comma-separated contenders to time (and the loop), "
                        "e.g. local-while-p1,local-procs-p2; default all")
    parser.add_argument("--rss", help="a workload: report each executor's peak RSS instead")
    parser.add_argument("--out", default="results/round_time.json")
    args = parser.parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    if args.rss:
        result = {ex: rss_of(args.rss, ex) for ex in ("local", "tff")}
        print(json.dumps(result, indent=2))
        with open(args.out, "w") as f:
            json.dump({"rss_mib": {args.rss: result}}, f, indent=2)
        return
    parallel = [int(p) for p in args.parallel.split(",")]
    results = {}
    with federated_runtime():
        for name in args.workloads.split(","):
            print(f"\n== {name} ({args.rounds} timed rounds)", flush=True)
            only = set(args.only.split(",")) if args.only else None
            r = results[name] = bench(name, args.rounds, parallel, only)
            print(f"{'contender':<18} {'median s':>9} {'x loop':>7} {'build s':>8}")
            for k, v in r["median_seconds"].items():
                print(f"{k:<18} {v:>9.3f} {r['ratio_to_loop'][k]:>7.2f} "
                      f"{r['build_seconds'][k]:>8.1f}")
            print(f"best local setting: {r['best_local_setting']}", flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
