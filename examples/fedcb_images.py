"""FedCB and the baselines of its Table 2 on medical images; FedCB Tables 2-4.

    python examples/fedcb_images.py                       # embedded invented OCT-C8-layout sample, CPU
    python examples/fedcb_images.py --data /path/to/OCT-C8 --image-size 224 --resnet-width 64 \\
        --num-rounds 200 --learning-rate 0.01 --temperature 17.5
    python examples/fedcb_images.py --dataset kvasir --data /path/to/kvasir-dataset-v2 \\
        --image-size 224 --resnet-width 64 --num-rounds 200 --learning-rate 0.01

Runs FedAvg, FedDyn, FedProx, FedRep, FedRoD, FedETF and FedCB (every one with Adam
and a 0.99 per-round learning-rate decay, as FedCB trains; ``--local-optimizer sgdm``
for the authors' scripts' SGD) on ResNet-18, the training images split over 12 clients
(``--clients 10`` for Kvasir-v2) by label Dirichlet beta (``--betas``, the paper's 0.05
and 0.1), half of them each round, local batch 8 and 2 epochs, for every seed of
``--seeds``; then FedCB with 25% and 50% of its 20 prompt templates (``--fractions``).
It prints and writes (under ``--out``):

* Table 2 (or 3 for Kvasir-v2): test accuracy and macro-F1 (%), mean ± std over the
  seeds, of each method's final global model (FedRep: its clients' personal models),
  beside the paper's;
* Table 4: FedCB with 25/50/100% of the prompts, beside the paper's;
* the mean round time and bytes per round of each method (FedCB's and FedETF's frozen
  classifiers are sent once to each client; their uploads hold no classifier).

Each run writes metrics.csv, summary.json, curves.png and models/ under
``--out``/beta_<b>/seed_<s>/ (and prompts_<f>/); the tables go to ``--out``/table_*.csv.

The preset (tens of minutes on a 2-core CPU; its figures can differ from one kind of CPU to
another): 32x32 images, a ResNet-18 of base width 8 (``--resnet-width``; 64 is the standard
11.2M-parameter net), 15 rounds, learning rate 1e-3 (the paper's 1e-2 for real data), the
in-process executor with two clients at once, and each algorithm's round traced once for all
seeds and betas (:func:`tffre.runner.reuse_processes`). FedCB's tau is 12.5 (the authors'
Kvasir-v2 value; 17.5 for OCT-C8). The numbers are the invented sample's: compare the layout,
not the values, with the paper's.
"""

import argparse
import os
import sys

# TF 2.14's oneDNN convolutions corrupt memory when a compiled ResNet step meets a batch of
# another size (see tffre.cli); set before TensorFlow is imported.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

from tffre import cli  # noqa: E402

PRESET = {"dataset": "oct-c8", "algorithm": "fedavg,feddyn,fedprox,fedrep,fedrod,fedetf,fedcb",
          "client_fraction": 0.5, "partition": "label-dirichlet", "num_rounds": 15,
          "eval_every": 5, "num_epochs": 2, "num_iters": 0, "batch_size": 8,
          "learning_rate": 1e-3, "lr_decay": 0.99, "local_optimizer": "adam", "mu": 0.01,
          "image_size": 32, "resnet_width": 8, "executor": "local", "max_parallel_clients": 2,
          "checkpoint_every": 0, "no_progress": True}


def _floats(text):
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") \
            from None


def _ints(text):
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got "
                                         f"{text!r}") from None


def main(argv):
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--betas", type=_floats, default=[0.05, 0.1])
    parser.add_argument("--seeds", type=_ints, default=[0, 1, 2])
    parser.add_argument("--fractions", type=_floats, default=[0.25, 0.5])
    parser.add_argument("--out", default="results/fedcb_images")
    ours, rest = parser.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        print(__doc__)
        print("--betas B,...      Dirichlet beta of each setting (default 0.05,0.1)\n"
              "--seeds S,...      seeds (trials) per setting (default 0,1,2)\n"
              "--fractions F,...  FedCB prompt fractions besides 1 (Table 4; default 0.25,0.5)")
        return cli.run_main(["--help"], preset=PRESET, prog="examples/fedcb_images.py")
    from tffre import runner
    from tffre.experiments import debiasing
    runner.reuse_processes()   # trace each algorithm's round once, not once per seed and beta
    runs = []
    settings = [(beta, seed, 1.0) for beta in ours.betas for seed in ours.seeds]
    settings += [(beta, seed, f) for f in ours.fractions for beta in ours.betas
                 for seed in ours.seeds]
    for beta, seed, fraction in settings:
        folder = os.path.join(ours.out, f"beta_{beta}", f"seed_{seed}")
        preset = dict(PRESET, alpha=beta, seed=seed, out=folder)
        if fraction != 1.0:
            folder = os.path.join(ours.out, f"prompts_{fraction}", f"beta_{beta}", f"seed_{seed}")
            preset.update(algorithm="fedcb", prompt_fraction=fraction, out=folder)
        print(f"\n=== beta = {beta}, seed = {seed}"
              + (f", FedCB with {fraction:.0%} of the prompts" if fraction != 1.0 else "") + " ===")
        code = cli.run_main(rest, prog="examples/fedcb_images.py", preset=preset)
        if code:
            return code
        runs.append((beta, seed, fraction, folder))
    frame = debiasing.collect(runs)
    frame.to_csv(os.path.join(ours.out, "runs.csv"), index=False)
    dataset = _dataset(rest)
    number = {"oct-c8": "2", "kvasir": "3"}[dataset]
    tables = {f"table_{number}": (f"Table {number}: test accuracy and macro-F1 (%), mean ± std "
                                  f"over seeds {ours.seeds}", debiasing.method_table(frame, dataset)),
              "table_4": ("Table 4: FedCB with a fraction of the prompts (paper: OCT-C8)",
                          debiasing.prompt_table(frame)),
              "cost": ("Mean round time (ms) and bytes per round", debiasing.cost_table(frame))}
    for key, (title, table) in tables.items():
        print(f"\n{title}")
        print(table.to_string(index=False))
        table.to_csv(os.path.join(ours.out, f"{key}.csv"), index=False)
    print(f"\nwrote {ours.out}/runs.csv, table_*.csv and the runs' folders")
    return 0


def _dataset(argv):
    """The --dataset among the passed-on arguments (the preset's otherwise)."""
    for i, arg in enumerate(argv):
        if arg == "--dataset" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--dataset="):
            return arg.split("=", 1)[1]
    return PRESET["dataset"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
