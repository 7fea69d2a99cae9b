"""What training part of an encoder costs and sends, against full fine-tuning.

    python benchmarks/partial_training.py --data /work/corpora/biobert_RE/GAD/1 [--rounds 3]
                                          [--settings full,top2,top4,lora8] [--out FILE.json]

One FedAvgT round of 10 clients (IID, every client every round, one local epoch of batch 16,
64 word pieces, all-MiniLM-L6-v2) on a relation set (``--dataset``, default GAD; without
``--data`` the embedded GAD-format sample), for each setting:

* ``full``: every layer and the embeddings train (``--trainable-layers 6``);
* ``top2``, ``top4``: the top 2 (4) layers train on each client's cached activations of the
  frozen layers below (``--trainable-layers``);
* ``lora8``: LoRA adapters of rank 8 on every layer's query and value (``--lora-rank 8``),
  on cached embedding outputs;
* ``top2-xla``: ``top2`` with each client step compiled by XLA (``tf.function(jit_compile=
  True)``), to see whether XLA pays on the encoder.

Each setting's job is prepared once (the prefix's activations computed: timed), its process
built, one warm-up round run (tracing), then ``--rounds`` rounds timed in interleaved order
across the settings, so that drifts in machine load hit all alike. Reported per setting: the
median round seconds and its ratio to ``full``, the bytes each client uploads per round and
receives at its first round and after, the activations' seconds, and (``top2-xla``) the
largest weight difference from ``top2`` after the timed rounds.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SETTINGS = {"full": {"trainable_layers": 6}, "top2": {"trainable_layers": 2},
            "top4": {"trainable_layers": 4}, "lora8": {"lora_rank": 8, "trainable_layers": None},
            "top2-xla": {"trainable_layers": 2}}
BASE = {"algorithm": "fedavgt", "partition": "iid", "clients": 10, "clients_per_round": 10,
        "batch_size": 16, "max_len": 64, "num_epochs": 1, "num_iters": 0,
        "learning_rate": 3e-4, "executor": "local", "seed": 0}


def xla_step():
    """Makes every TrainerSlot's step an XLA-compiled function (for ``top2-xla``); returns
    the undo."""
    import tensorflow as tf
    from tffre import client_work
    plain = client_work.TrainerSlot.step

    def step(self, batch, info):
        compiled = self.__dict__.get("_xla_step")
        if compiled is None:
            compiled = self._xla_step = tf.function(lambda b, i: plain(self, b, i),
                                                    jit_compile=True)
        return compiled(batch, info)
    client_work.TrainerSlot.step = step
    return lambda: setattr(client_work.TrainerSlot, "step", plain)


def start(name, dataset, data, out):
    """(process, state, job, activations seconds) of one setting, after a warm-up round."""
    import tensorflow as tf
    from tffre import builder, config
    from tffre.definition import TaskContext
    from tffre.runner.loop import data_seed
    from tffre.runner.processes import pretrained_weights
    values = dict(BASE, dataset=dataset, out=out, **SETTINGS[name])
    if data:
        values["data"] = data
    cfg = config.resolve(values)
    begin = time.perf_counter()
    job = cfg.task.prepare(cfg)
    prepared = time.perf_counter() - begin
    undo = xla_step() if name.endswith("-xla") else None
    try:
        tf.keras.utils.set_random_seed(0)
        (hp,) = cfg.hparams.values()
        process = builder.build_algorithm("FedAvgT", job.model.model_fn, loss=job.model.loss,
                                          input_spec=job.data.element_spec(),
                                          context=TaskContext.of(
                                              num_clients=len(job.data.client_ids),
                                              clients_per_round=cfg.run.clients_per_round,
                                              concepts=job.concepts, prompts=job.prompts),
                                          executor="local",
                                          **hp.asdict())
        tf.keras.utils.set_random_seed(0)
        state = process.set_model_weights(process.initialize(), pretrained_weights(
            process.model_fn, job.model.load_pretrained))
        ids = job.data.client_ids
        datasets = [job.data.client_dataset(c, batch_size=16, seed=data_seed(0, 1))
                    for c in ids]
        output = process.next(state, datasets, client_ids=ids)   # warm-up: traces
    finally:
        if undo:
            undo()
    return dict(process=process, state=output.state, job=job, prepared=prepared,
                first=output.metrics["round"], xla=undo is not None)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="gad")
    parser.add_argument("--data", default=None, help="the relation set (default: the sample)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settings", default="full,top2,top4,lora8,top2-xla")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    import numpy as np
    from tffre.runner.loop import data_seed
    from tffre.runtime import peak_rss_mib
    names = args.settings.split(",")
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting(s) {', '.join(unknown)}; valid: {', '.join(SETTINGS)}")
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            print(f"preparing {name} ...", flush=True)
            runs[name] = start(name, args.dataset, args.data, os.path.join(tmp, name))
    times = {name: [] for name in names}
    for rnd in range(2, args.rounds + 2):
        for name in names:
            run = runs[name]
            undo = xla_step() if run["xla"] else None
            try:
                ids = run["job"].data.client_ids
                datasets = [run["job"].data.client_dataset(c, batch_size=16,
                                                           seed=data_seed(0, rnd)) for c in ids]
                begin = time.perf_counter()
                output = run["process"].next(run["state"], datasets, client_ids=ids)
                times[name].append(time.perf_counter() - begin)
                run["state"], run["later"] = output.state, output.metrics["round"]
            finally:
                if undo:
                    undo()
            print(f"round {rnd} {name}: {times[name][-1]:.1f} s", flush=True)
    base = statistics.median(times[names[0]])
    report = {"dataset": args.dataset, "data": args.data or "sample", "rounds": args.rounds,
              "base": names[0], "settings": {}}
    for name in names:
        run = runs[name]
        median = statistics.median(times[name])
        clients = run["first"]["num_clients"]
        row = {"median_round_seconds": round(median, 2),
               "ratio_to_" + names[0]: round(median / base, 3),
               "round_seconds": [round(t, 2) for t in times[name]],
               "upload_bytes_per_client": run["later"]["bytes_uploaded"] / clients,
               "broadcast_bytes_per_client_first_round": run["first"]["bytes_broadcast"] / clients,
               "broadcast_bytes_per_client_later": run["later"]["bytes_broadcast"] / clients,
               "prepare_seconds": round(run["prepared"], 1),
               "trained": run["job"].info.get("partial", "the whole encoder")}
        if name.endswith("-xla") and name[:-4] in runs:
            twin = runs[name[:-4]]["process"].get_model_weights(runs[name[:-4]]["state"])
            mine = run["process"].get_model_weights(run["state"])
            row["max_weight_diff_vs_" + name[:-4]] = float(max(
                np.abs(np.asarray(a) - np.asarray(b)).max()
                for a, b in zip(mine.trainable, twin.trainable)))
        report["settings"][name] = row
    report["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(report, indent=1))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
