"""Federated logistic regression over mean word vectors on IMCS-V2 (FLCMC Table 9).

    python examples/imcs_logreg.py                 # embedded synthetic sample
    python examples/imcs_logreg.py --data /path/to/IMCS-V2 --w2v medical_vectors.bin --num-rounds 200

Runs the SGD class (FedAvg, FedProx, FedAtt, FedPA; learning rate 0.01) and
the Adam class (FedAvgS, FedProxP, FedAttS, FedPAP; 0.001) with mu 0.03 and
stepsize 9, and prints each one's maximum accuracy beside Table 9.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tffre import imcs_experiment  # noqa: E402

SGD = "fedavg,fedprox,fedatt,fedpa"
ADAM = "fedavgs,fedproxp,fedatts,fedpap"


def main(argv=None):
    """Runs the SGD and the Adam class, each with its learning rate."""
    parser = imcs_experiment.build_parser(
        __doc__.splitlines()[0], algorithms=f"{SGD},{ADAM}", num_rounds=30, learning_rate=None,
        out="results/imcs_logreg")
    args = parser.parse_args(argv)

    def model_fn_for(matrix, num_classes, max_len):
        from tffre.models import mean_embedding_logistic
        return lambda: mean_embedding_logistic(num_classes, max_len, embedding_matrix=matrix)

    # learning_rate None: each algorithm takes its optimizer's default (SGD 0.01, Adam 0.001).
    imcs_experiment.run(args, model_fn_for, imcs_experiment.PAPER_TABLE_9,
                        "logistic regression (Table 9: paper's max acc)")


if __name__ == "__main__":
    main()
