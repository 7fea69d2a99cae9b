"""Federated LSTM symptom classification on IMCS-V2 (FLCMC Tables 10 and 11).

    python examples/imcs_lstm.py                      # embedded synthetic sample, < 5 min on CPU
    python examples/imcs_lstm.py --data /path/to/IMCS-V2 --w2v medical_vectors.bin --num-rounds 100

Defaults follow the paper's Table 10 setting: FedAvgS, FedProxP, FedAttS and
FedPAP, learning_rate 0.001, mu 0.03, stepsize 9, 10 clients per round.
Writes metrics.csv, summary.json, curves.png, partition.csv and partition.png
to --out. Uses a GPU when TensorFlow sees one.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tffre import imcs_experiment  # noqa: E402


def main(argv=None):
    """Parses the flags and runs the experiment."""
    parser = imcs_experiment.build_parser(
        __doc__.splitlines()[0], algorithms="fedavgs,fedproxp,fedatts,fedpap", num_rounds=20,
        learning_rate=0.001, out="results/imcs_lstm")
    parser.add_argument("--lstm-units", type=int, default=64)
    parser.add_argument("--bidirectional", action="store_true")
    parser.add_argument("--freeze-embedding", action="store_true")
    args = parser.parse_args(argv)

    def model_fn_for(matrix, num_classes, max_len):
        from tffre.models import lstm_classifier
        return lambda: lstm_classifier(num_classes, max_len, embedding_matrix=matrix,
                                       trainable_embedding=not args.freeze_embedding,
                                       lstm_units=args.lstm_units,
                                       bidirectional=args.bidirectional, seed=args.seed)

    imcs_experiment.run(args, model_fn_for, imcs_experiment.PAPER_TABLE_10,
                        "LSTM (Table 10: paper's max acc / min loss)")


if __name__ == "__main__":
    main()
