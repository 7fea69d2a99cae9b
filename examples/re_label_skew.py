"""FedCMC and its label-skew baselines on sentence RE: the FedCMC Table 2 grid and the Fig. 4 ablation.

    python examples/re_label_skew.py                      # embedded synthetic i2b2-format sample, CPU
    python examples/re_label_skew.py --dataset chemprot --data /path/to/ChemProt --num-rounds 50
    python examples/re_label_skew.py --dataset pgr --data /path/to/PGR --encoder /path/to/BERT

Runs centralised, FedAvgT (FedAvg with tf.keras Adam: FedCMC trains every method at
learning rate 5e-5, an Adam rate), MOON, FedRS, FedLC and FedCMC at alpha = 0.5 and
0.05 (``--alphas``) with K = 10 clients, all clients every round, and prints the table
in the paper's layout beside its numbers for the dataset (i2b2, ChemProt or PGR). Then
the ablation of section 4.3 (Fig. 4): FedCMC with major, minor (Eq. 18) and random
classifier vectors at alpha = 0.01. Each run writes metrics.csv, summary.json,
curves.png (F1 against round, as Fig. 3), partition.csv/png, per_class/ and models/
under ``--out``.

The preset is sized for a 2-core CPU, where it takes tens of minutes: 10 rounds of one local
epoch of batch 8 (as FedCMC), learning rate 5e-4, 40 word pieces, the in-process executor, and
the whole all-MiniLM-L6-v2 of which the top 2 layers train (``--trainable-layers 2``): each
client computes the 4 frozen layers' outputs on its examples once and trains the top on them
(3.6M trained and uploaded parameters). FedCMC uses DistilBERT, BERT's 6-layer distillation;
``--trainable-layers 6`` fine-tunes every layer, as the paper. The numbers are the synthetic
sample's: compare the layout, not the values, with the paper's.
"""

import sys

from tffre.sweep import run_sweep

PRESET = {"dataset": "i2b2", "algorithm": "fedavgt,moon,fedrs,fedlc,fedcmc", "clients": 10,
          "clients_per_round": 10, "num_rounds": 10, "eval_every": 1, "num_epochs": 1,
          "num_iters": 0, "learning_rate": 5e-4, "batch_size": 8, "max_len": 40,
          "trainable_layers": 2, "executor": "local", "checkpoint_every": 0, "centralised": True}
ABLATION = ("ablation_alpha_0.01",
            "ablation (FedCMC section 4.3, Fig. 4): major / minor / random vectors, alpha = 0.01",
            {"algorithm": "fedcmc,fedcmc-minor,fedcmc-random", "alpha": 0.01,
             "centralised": False})

if __name__ == "__main__":
    sys.exit(run_sweep(sys.argv[1:], preset=PRESET, prog="examples/re_label_skew.py",
                       doc=__doc__, default_out="results/re_label_skew",
                       extra_runs=[ABLATION]))
