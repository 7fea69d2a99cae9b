"""Command line: ``python -m tffre run ...`` (also installed as ``tffre``).

Example (FLCMC Table 8):

    python -m tffre run --algorithm fedavgs,fedproxp,fedatts,fedpap --dataset synthetic \\
        --alpha 0.5 --beta 0.5 --model logistic --num-rounds 100 --clients-per-round 10 \\
        --learning-rate 0.001 --mu 0.03 --stepsize 4 --seed 0 --out results/x
"""

import argparse
import os
import sys

# Quieten TensorFlow's C++ start-up logging unless the user asked for it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DATASETS = ("synthetic",)
MODELS = ("logistic",)


class _OneLineParser(argparse.ArgumentParser):
    """Reports bad arguments in one line, without the usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def build_parser():
    """The argument parser of ``python -m tffre``."""
    parser = _OneLineParser(prog="python -m tffre", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    run = sub.add_parser("run", help="run federated algorithms and write metrics, summary, plot")
    run.add_argument("--algorithm", required=True,
                     help="comma-separated names: fedavg,fedprox,fedatt,fedpa,fedavgs,"
                          "fedavgt,fedproxp,fedatts,fedpap")
    run.add_argument("--dataset", default="synthetic", choices=DATASETS)
    run.add_argument("--alpha", type=_non_negative_float, default=0.5,
                     help="synthetic label-skew alpha")
    run.add_argument("--beta", type=_non_negative_float, default=0.5,
                     help="synthetic feature-skew beta")
    run.add_argument("--iid", action="store_true", help="synthetic IID variant")
    run.add_argument("--num-clients", type=_positive_int, default=30)
    run.add_argument("--model", default="logistic", choices=MODELS)
    run.add_argument("--num-rounds", type=_positive_int, default=100)
    run.add_argument("--clients-per-round", type=_positive_int, default=10)
    run.add_argument("--batch-size", type=_positive_int, default=10)
    run.add_argument("--learning-rate", type=_non_negative_float, default=None,
                     help="default: 0.01 for SGD/PGD, 0.001 for the Adam family")
    run.add_argument("--num-epochs", type=_positive_int, default=None)
    run.add_argument("--num-iters", type=_positive_int, default=None)
    run.add_argument("--mu", type=_non_negative_float, default=None)
    run.add_argument("--stepsize", type=_non_negative_float, default=None)
    run.add_argument("--granularity", choices=("layer", "model"), default=None)
    run.add_argument("--eval-every", type=_positive_int, default=1)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", required=True, help="output folder")
    run.add_argument("--no-progress", action="store_true")
    return parser


def main(argv=None):
    """Entry point; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from tffre import algorithms  # heavy imports after argument checks
    names = [n.strip() for n in args.algorithm.split(",") if n.strip()]
    if not names:
        parser.error("--algorithm: give at least one algorithm name")
    for name in names:
        try:
            algorithms.get_spec(name)
        except ValueError as err:
            parser.error(f"--algorithm: {err}")
    import tensorflow as tf
    from tffre.data.synthetic import make_synthetic
    from tffre.models import logistic_regression
    from tffre.runner import run_experiment
    from tffre.runtime import federated_runtime

    data = make_synthetic(args.alpha, args.beta, iid=args.iid, num_clients=args.num_clients,
                          seed=args.seed)
    num_features = data.element_spec()[0].shape[-1]
    hparams = {"learning_rate": args.learning_rate, "num_epochs": args.num_epochs,
               "num_iters": args.num_iters, "mu": args.mu, "stepsize": args.stepsize,
               "granularity": args.granularity}
    try:
        with federated_runtime():
            summary = run_experiment(
                data, lambda: logistic_regression(num_features, data.num_classes),
                loss=tf.keras.losses.SparseCategoricalCrossentropy(), algorithm_names=names,
                num_rounds=args.num_rounds, clients_per_round=args.clients_per_round,
                batch_size=args.batch_size, seed=args.seed, eval_every=args.eval_every,
                hparams=hparams, out_dir=args.out, progress=not args.no_progress)
    except ValueError as err:
        parser.error(str(err))
    except KeyboardInterrupt:
        print(f"interrupted; rows so far are in {args.out}/metrics.csv", file=sys.stderr)
        return 130
    print(format_summary(summary))
    print(f"wrote {args.out}/metrics.csv, summary.json, curves.png")
    return 0


def format_summary(summary):
    """A Table 8-style text table of max accuracy and min loss per algorithm."""
    lines = [f"{'algorithm':<10} {'max acc':>8} {'min loss':>9} {'round ms':>9} {'up bytes/round':>15}"]
    for name, s in summary["algorithms"].items():
        lines.append(f"{name:<10} {s['max_test_accuracy']:>8.4f} {s['min_train_loss']:>9.4f} "
                     f"{s['mean_round_ms']:>9.1f} {s['bytes_uploaded_per_round']:>15,.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
