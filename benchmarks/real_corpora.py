"""The seeds' comparisons on real corpora, at a scale a 2-core CPU runs (issue 23).

    python benchmarks/real_corpora.py --root /work/corpora --only fedcmc-gad [--out results/real]

``--root`` holds the public copies, as the README's "Real corpora" says where to get them:

* ``biobert_RE/GAD/1`` and ``biobert_RE/euadr/1``: BioBERT's fold 1 (BioMedBERT/biomedbert);
* ``cdr_pubtator``: BioCreative V CDR in PubTator (train, development and test files).

Comparisons (``--only`` picks some; each is kept under 30 minutes here):

* ``fedcmc-gad``, ``fedcmc-euadr``: FedCMC Table 2 style: FedAvgT, MOON, FedRS, FedLC and
  FedCMC at label-Dirichlet alpha 0.5 and 0.05, 10 clients, all every round;
* ``feded-gad``: FedED against FedAvgT (100 clients, 10% per round, 20% of train as the
  server's set D_v, IID, as FedED's setting);
* ``fedcb-gad``: FedCB against FedAvg, alpha 0.5;
* ``fedlcc-cdr``: FedLCC against FedAvg and FedAtt on CDR, structural-entropy and IID splits.

The scale (``SCALE_KEYS`` of each comparison, printed and written): the first
``encoder_layers`` layers of all-MiniLM-L6-v2 with a frozen embedding, ``max_len`` word
pieces, ``num_rounds`` rounds of one local epoch capped at ``num_iters`` steps (0: no cap),
one seed. Every table shows what guessing scores (the majority class, and for a
binary set a relation for every pair) beside the F1 and the paper's figure; each run's own
folder holds metrics.csv, summary.json and its printed table. Writes ``<out>/<comparison>.csv``
and ``<out>/summary.json``.
"""

import argparse
import os
import sys
import time

SENTENCE = {"encoder_layers": 2, "freeze_embedding": True, "max_len": 64, "num_rounds": 3,
            "num_epochs": 1, "num_iters": 0, "batch_size": 8, "learning_rate": 5e-4,
            "executor": "local", "checkpoint_every": 0, "no_progress": True, "seed": 0}
# CDR: a round of 10 clients' whole 50 documents (17 steps each) plus scoring 1,000 held-out
# documents took ~2 min here: 18 such rounds exceed 30 minutes. 6 steps of 3 documents a
# round, and no train_loss pass (a third 500 documents).
DOCUMENT = {"encoder_layers": 1, "freeze_embedding": True, "max_len": 256, "num_rounds": 3,
            "num_epochs": 1, "num_iters": 6, "batch_size": 3, "learning_rate": 3e-4,
            "local_optimizer": "adam", "clients": 10, "clients_per_round": 10,
            "no_train_loss": True, "executor": "local", "checkpoint_every": 0,
            "no_progress": True, "seed": 0}
LABEL_SKEW = "fedavgt,moon,fedrs,fedlc,fedcmc"
# What "the scale" of a comparison is, printed with its table and written to summary.json.
SCALE_KEYS = ("encoder_layers", "freeze_embedding", "max_len", "clients", "clients_per_round",
              "client_fraction", "num_rounds", "num_epochs", "num_iters", "batch_size",
              "learning_rate", "no_train_loss", "seed")


def comparisons(root):
    """{comparison: [(label, preset)]}: the runs of each comparison."""
    gad = os.path.join(root, "biobert_RE", "GAD", "1")
    euadr = os.path.join(root, "biobert_RE", "euadr", "1")
    cdr = os.path.join(root, "cdr_pubtator")
    # GAD's 10 clients hold ~380 training pairs each (48 batches of 8); capping a round at 12
    # local steps keeps five algorithms at two alphas under 30 minutes on 2 cores.
    skew = {"algorithm": LABEL_SKEW, "clients": 10, "clients_per_round": 10,
            **dict(SENTENCE, num_iters=12)}
    # On GAD (5,330 examples to score each round, 3,837 of them for train_loss) thirty
    # evaluated rounds at 2 layers took ~2 min each here: one layer, and no train_loss pass.
    gad_skew = dict(skew, encoder_layers=1, no_train_loss=True)
    return {
        "fedcmc-gad": [(f"alpha {a}", {"dataset": "gad", "data": gad, "alpha": a, **gad_skew})
                       for a in (0.5, 0.05)],
        "fedcmc-euadr": [(f"alpha {a}", {"dataset": "euadr", "data": euadr, "alpha": a,
                                         **skew}) for a in (0.5, 0.05)],
        "feded-gad": [("iid", {"dataset": "gad", "data": gad, "algorithm": "fedavgt,feded",
                               "clients": 100, "client_fraction": 0.1, "partition": "iid",
                               "server_fraction": 0.2, "representation": "cls_entities",
                               **dict(SENTENCE, num_rounds=5, batch_size=4)})],
        "fedcb-gad": [("alpha 0.5", {"dataset": "gad", "data": gad, "algorithm": "fedavg,fedcb",
                                     "alpha": 0.5, "clients": 10, "clients_per_round": 10,
                                     "local_optimizer": "adam",
                                     **dict(SENTENCE, num_iters=24)})],
        "fedlcc-cdr": [(part, {"dataset": "cdr", "data": cdr, "partition": part,
                               "algorithm": "fedavg,fedatt,fedlcc", **DOCUMENT})
                       for part in ("structural-entropy", "iid")],
    }


def rows_of(comparison, label, summary):
    """The table rows of one run: each algorithm's F1 beside the guesses and the paper."""
    from tffre import paper_tables
    config = summary["config"]
    _, paper = paper_tables.reference(config["dataset"], config["model"],
                                      alpha=config.get("alpha"), algorithms=list(
                                          summary["algorithms"]),
                                      partition=config.get("partition"))
    out = []
    for name, s in summary["algorithms"].items():
        out.append({"comparison": comparison, "setting": label, "algorithm": name,
                    "F1 at best dev": s.get("test_f1_at_best_dev"),
                    "max F1": s.get("max_test_f1"), "final F1": s.get("final_test_f1"),
                    "majority guess F1": summary.get("majority_class_test_f1"),
                    "all-positive F1": summary.get("all_positive_test_f1"),
                    "paper F1": paper.get(name, {}).get("test_f1"),
                    "mean round ms": s.get("mean_round_ms")})
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the folder of the public copies")
    parser.add_argument("--only", default=None, help="comma-separated comparisons")
    parser.add_argument("--out", default="results/real_corpora")
    args = parser.parse_args(argv)
    import pandas as pd
    from tffre.jsonio import read_json_object, write_json
    from tffre.sweep import run_preset
    chosen = comparisons(args.root)
    names = args.only.split(",") if args.only else list(chosen)
    unknown = [n for n in names if n not in chosen]
    if unknown:
        parser.error(f"unknown comparison(s) {', '.join(unknown)}; valid: {', '.join(chosen)}")
    os.makedirs(args.out, exist_ok=True)
    # Comparisons run one at a time (--only) add to the summary rather than replace it.
    path = os.path.join(args.out, "summary.json")
    report = {"comparisons": {}}
    if os.path.exists(path):
        report["comparisons"].update(read_json_object(path).get("comparisons", {}))
    for name in names:
        start, rows = time.perf_counter(), []
        first = chosen[name][0][1]     # the runs of a comparison share their scale
        scale = {k: first[k] for k in SCALE_KEYS if k in first}
        for label, preset in chosen[name]:
            folder = os.path.join(args.out, name, label.replace(" ", "_"))
            print(f"\n=== {name}: {label} ===")
            rows += rows_of(name, label, run_preset(preset, folder,
                                                    prog="benchmarks/real_corpora.py",
                                                    rerun=True))
        seconds = round(time.perf_counter() - start)
        table = pd.DataFrame(rows)
        table.to_csv(os.path.join(args.out, f"{name}.csv"), index=False)
        report["comparisons"][name] = {"seconds": seconds, "scale": scale, "rows": rows}
        print(f"\n{name} ({seconds} s): test relation F1 (positive class for binary sets)")
        print("scale: " + ", ".join(f"{k} {v}" for k, v in scale.items()))
        print(table.drop(columns="comparison").to_string(
            index=False, na_rep="-", float_format=lambda v: f"{v:.4f}"))
    write_json(path, report)
    print(f"\nwrote {args.out}/: " + ", ".join(f"{n}.csv" for n in names) + ", summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
