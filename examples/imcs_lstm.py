"""Federated LSTM symptom classification on IMCS-V2 (FLCMC Tables 10 and 11).

    python examples/imcs_lstm.py                      # embedded synthetic sample, CPU
    python examples/imcs_lstm.py --data /path/to/IMCS-V2 --w2v medical_vectors.bin --num-rounds 100

The paper's Table 10 setting: FedAvgS, FedProxP, FedAttS and FedPAP,
learning_rate 0.001, mu 0.03, stepsize 9, 10 of 20 clients per round. Any
``python -m tffre run`` flag overrides these (``--help`` lists them). Writes
metrics.csv, summary.json, curves.png, partition.csv/png, models/ and
checkpoints/ to --out. Uses a GPU when TensorFlow sees one.
"""

import sys

from tffre import cli

# Table 10's per-round setting. 12 rounds, evaluated every 2, keep the default run to a few
# minutes on a 2-core CPU (most of it in the rounds, the rest mostly in evaluation).
PRESET = {"dataset": "imcs", "model": "lstm", "algorithm": "fedavgs,fedproxp,fedatts,fedpap",
          "num_rounds": 12, "eval_every": 2, "clients": 20, "clients_per_round": 10,
          "learning_rate": 0.001, "mu": 0.03, "stepsize": 9.0, "num_epochs": 10, "num_iters": 20,
          "out": "results/imcs_lstm"}

if __name__ == "__main__":
    sys.exit(cli.run_main(sys.argv[1:], preset=PRESET, prog="examples/imcs_lstm.py"))
