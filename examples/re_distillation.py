"""FedED: clients upload only predictions on the server's set D_v; FedED Tables 3-8.

    python examples/re_distillation.py                    # embedded synthetic i2b2-format sample, CPU
    python examples/re_distillation.py --dataset gad --clients 50
    python examples/re_distillation.py --data /path/to/i2b2 --encoder /path/to/ClinicalBERT \\
        --trainable-layers 12 --num-rounds 50 --grid 2x1,8x1,2x3,8x3

Runs FedAvgT, FedAttT (FedAvg and FedAtt with tf.keras Adam: FedED trains at 2.5e-5, an
Adam rate) and FedED on K = 100 clients with C = 0.1 of them a round (FedED section 4.2;
use ``--clients 50`` for GAD and EU-ADR), local batch B = 4 and E = 2 epochs, with the
paper's defaults of entity blinding and the [CLS] + e1 + e2 representation. A seeded 20%
of the training examples is the server's labelled set D_v (``--server-fraction``, or a file
with ``--server-data``); no client trains on it, for any algorithm. Then it prints:

* Tables 3-5: each final model's P/R/F1 (and the centralised model's), beside the paper's;
* Table 6: F1 per relation type of FedAvgT, FedAttT and FedED;
* Table 7: the bytes each client uploads per round (measured from the round's types);
* Table 8: the rounds each algorithm needs to reach ``--target-f1`` for each local batch
  size and epoch count of ``--grid`` (BxE; the first is the main run).

Each setting writes metrics.csv, summary.json, curves.png, per_class/ and models/ under
``--out``/B<b>_E<e>/; the tables go to ``--out``/table_*.csv.

The preset is sized for a 2-core CPU, where it takes several minutes: 25 rounds, 40 word
pieces, the top 2 of all-MiniLM-L6-v2's 6 layers trained on each client's cached activations
of the 4 below (``--trainable-layers 2``), learning rate 5e-4 and the
in-process executor. The numbers are the synthetic sample's: compare the layout, not the values,
with the paper's; FedED's upload (predictions on D_v, not a model delta) is orders of magnitude
smaller by construction.
"""

import argparse
import os
import sys

from tffre import cli
from tffre.experiments import distillation

PRESET = {"dataset": "i2b2", "algorithm": "fedavgt,fedattt,feded", "clients": 100,
          "client_fraction": 0.1, "partition": "iid", "num_rounds": 25, "eval_every": 1,
          "num_epochs": 2, "num_iters": 0, "batch_size": 4, "learning_rate": 5e-4,
          "max_len": 40, "trainable_layers": 2,
          "blind_entities": True, "representation": "cls_entities", "server_fraction": 0.2,
          "executor": "local", "checkpoint_every": 0, "centralised": True}


def _grid(text):
    try:
        return [tuple(int(v) for v in item.lower().split("x")) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected BxE[,BxE...], got {text!r}") from None


def main(argv):
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--grid", type=_grid, default=[(4, 2), (8, 1)])
    parser.add_argument("--target-f1", type=float, default=0.5)
    parser.add_argument("--out", default="results/re_distillation")
    ours, rest = parser.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        print(__doc__)
        print("--grid BxE,...   local batch size x epochs per setting (default 4x2,8x1)\n"
              "--target-f1 F    Table 8's target test F1 (default 0.5; the paper: 0.72)")
        return cli.run_main(["--help"], preset=PRESET, prog="examples/re_distillation.py")
    dirs = {}
    for i, (batch, epochs) in enumerate(ours.grid):
        dirs[(batch, epochs)] = os.path.join(ours.out, f"B{batch}_E{epochs}")
        print(f"\n=== B = {batch}, E = {epochs} ===")
        code = cli.run_main(rest, prog="examples/re_distillation.py", preset=dict(
            PRESET, batch_size=batch, num_epochs=epochs, out=dirs[(batch, epochs)],
            centralised=PRESET["centralised"] and i == 0))
        if code:
            return code
    main_dir = dirs[ours.grid[0]]
    tables = {"prf": ("Tables 3-5: final models' P/R/F1 (micro over the positive classes)",
                      distillation.prf_table(main_dir)),
              "per_class": ("Table 6: F1 per relation type",
                            distillation.per_class_table(main_dir)),
              "upload": ("Table 7: bytes per client per round",
                         distillation.upload_table(main_dir)),
              "rounds": (f"Table 8: rounds to test F1 >= {ours.target_f1} (paper: "
                         f"{distillation.paper_tables.FEDED_TABLE_8_TARGET} on real i2b2)",
                         distillation.rounds_table(dirs, ours.target_f1))}
    for key, (title, table) in tables.items():
        print(f"\n{title}")
        print(table.to_string(float_format=lambda v: f"{v:.4f}", na_rep="-"))
        table.to_csv(os.path.join(ours.out, f"table_{key}.csv"), index_label="row")
    print(f"\nwrote {ours.out}/table_*.csv and {', '.join(sorted(os.path.basename(d) for d in dirs.values()))}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
