"""Federated logistic regression over mean word vectors on IMCS-V2 (FLCMC Table 9).

    python examples/imcs_logreg.py                 # embedded synthetic sample
    python examples/imcs_logreg.py --data /path/to/IMCS-V2 --w2v medical_vectors.bin --num-rounds 200

Runs the SGD class (FedAvg, FedProx, FedAtt, FedPA; learning rate 0.01) and
the Adam class (FedAvgS, FedProxP, FedAttS, FedPAP; 0.001: each algorithm
takes its optimizer's default) with mu 0.03 and stepsize 9. Any
``python -m tffre run`` flag overrides these.
"""

import sys

from tffre import cli

PRESET = {"dataset": "imcs", "model": "mean-logistic",
          "algorithm": "fedavg,fedprox,fedatt,fedpa,fedavgs,fedproxp,fedatts,fedpap",
          "num_rounds": 30, "clients": 20, "clients_per_round": 10, "mu": 0.03, "stepsize": 9.0,
          "num_epochs": 10, "num_iters": 20, "out": "results/imcs_logreg"}

if __name__ == "__main__":
    sys.exit(cli.run_main(sys.argv[1:], preset=PRESET, prog="examples/imcs_logreg.py"))
