"""Federated sentence-level relation extraction under label skew (the shape of FedCMC Table 2).

    python examples/re_sentence.py                       # embedded synthetic i2b2-format sample, CPU
    python examples/re_sentence.py --dataset chemprot --data /path/to/ChemProt --num-rounds 50
    python examples/re_sentence.py --alphas 0.5,0.05,0.01 --encoder /path/to/BiomedBERT

Runs FedAvgT, FedProxP and FedAttS (FedAvg, FedProx and FedAtt with the FLCMC
Adam-family local optimizers) on all-MiniLM-L6-v2 (or ``--encoder DIR``) once
per label-skew alpha (``--alphas``, default FedCMC's 0.5 and 0.05, K = 10
clients), plus the centralised reference at the same budget, and prints a
FedCMC Table 2-style table: rows are algorithms, columns F1 per alpha, beside
the paper's figures. Each alpha's run is ``python -m tffre run`` with this
preset (any of its flags overrides it) and writes metrics.csv, summary.json,
curves.png, partition.csv/png, models/ and checkpoints/ to
``--out``/alpha_<a>/; the combined table goes to ``--out``/table.csv and
``--out``/summary.json.

The preset is sized for a 2-core CPU, where it takes several minutes: 20 rounds, 5 of 10 clients
a round, one local epoch of batch 8 (as FedCMC), the top 2 of all-MiniLM-L6-v2's 6 layers
trained on each client's cached activations of the 4 below (``--trainable-layers 2``;
``--trainable-layers 6`` fine-tunes every layer), an Adam-family local optimizer at learning
rate 3e-4 (FedCMC's 5e-5 is an Adam rate for a whole encoder; with SGD the encoder needs many
more rounds: use ``--algorithm fedavg,fedprox,fedatt --learning-rate 0.01 --num-rounds 50``), 40
word pieces (the sample's longest example has 37), and the in-process executor (TFF's runtime is
several times slower for transformer models on a CPU; see docs/how-to/executors.md).
"""

import sys

from tffre.sweep import run_sweep

PRESET = {"dataset": "i2b2", "algorithm": "fedavgt,fedproxp,fedatts", "clients": 10,
          "clients_per_round": 5, "num_rounds": 20, "eval_every": 2, "num_epochs": 1,
          "num_iters": 0, "learning_rate": 3e-4, "mu": 0.01, "batch_size": 8, "max_len": 40,
          "trainable_layers": 2, "executor": "local", "checkpoint_every": 0,
          "centralised": True}

if __name__ == "__main__":
    sys.exit(run_sweep(sys.argv[1:], preset=PRESET, prog="examples/re_sentence.py", doc=__doc__,
                       default_out="results/re_sentence"))
