"""The IMCS-V2 experiment behind ``examples/imcs_lstm.py`` and ``examples/imcs_logreg.py``.

Loads IMCS (the embedded sample by default), builds the task, splits whole
dialogues over clients, segments with jieba + the medical dictionary, maps
tokens through public Word2Vec vectors, runs the chosen algorithms with
:func:`tffre.runner.run_experiment`, and prints Table 10/11-style tables.
"""

import argparse
import json
import os
import time

import numpy as np
import pandas as pd

from tffre import resources
from tffre.data import imcs
from tffre.data.imcs_federated import build_imcs_federated
from tffre.data.partition import METHODS
from tffre.plots import plot_partition
from tffre.text import MedicalSegmenter, Vocabulary
from tffre.text.word2vec import load_vectors, train_word2vec

SAMPLE_DIR = resources.path("imcs_sample")
SAMPLE_VECTORS = os.path.join(SAMPLE_DIR, "w2v_sample.txt")

# FLCMC Table 10 (LSTM + Adam, IMCS-V2): max accuracy, min loss; Table 11: mean round ms.
PAPER_TABLE_10 = {"FedAvgS": (0.8308, 0.0684), "FedProxP": (0.8692, 0.0010),
                  "FedAttS": (0.8692, 0.0184), "FedPAP": (0.8769, 0.0005)}
PAPER_TABLE_11 = {"FedAvgS": 5816.91, "FedProxP": 8993.86, "FedAttS": 5762.10, "FedPAP": 8627.51}
# FLCMC Table 9 (logistic regression, IMCS-V2): max accuracy, SGD class vs Adam class.
PAPER_TABLE_9 = {"FedAvg": 0.73, "FedProx": 0.73, "FedAtt": 0.75, "FedPA": 0.78,
                 "FedAvgS": 0.76, "FedProxP": 0.78, "FedAttS": 0.79, "FedPAP": 0.82}


def build_parser(description, *, algorithms, num_rounds, learning_rate, out):
    """The shared command line of the IMCS examples."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data", default=SAMPLE_DIR,
                   help="IMCS-V2 folder or split file (default: the embedded synthetic sample)")
    p.add_argument("--task", default="symptom", choices=imcs.TASKS)
    p.add_argument("--algorithms", default=algorithms,
                   help="comma-separated registry names (SGD family included)")
    p.add_argument("--num-rounds", type=int, default=num_rounds)
    p.add_argument("--clients", type=int, default=20, help="number of clients (institutions)")
    p.add_argument("--clients-per-round", type=int, default=10)
    p.add_argument("--partition", default="diagnosis-dirichlet", choices=METHODS)
    p.add_argument("--alpha", type=float, default=0.5, help="Dirichlet concentration")
    p.add_argument("--w2v", help="pretrained word2vec vectors (text or binary format)")
    p.add_argument("--w2v-from-clients", action="store_true",
                   help="train vectors on the pooled client training texts (breaks the "
                        "federated privacy model; for experiments only)")
    p.add_argument("--max-len", type=int, default=None,
                   help="tokens per example (default: 16 for sentence tasks, 192 for diagnosis)")
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--learning-rate", type=float, default=learning_rate,
                   help="default: 0.01 for SGD/PGD, 0.001 for the Adam family" if learning_rate is None else None)
    p.add_argument("--mu", type=float, default=0.03)
    p.add_argument("--stepsize", type=float, default=9.0)
    p.add_argument("--num-epochs", type=int, default=10)
    p.add_argument("--num-iters", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=out)
    p.add_argument("--no-progress", action="store_true")
    return p


def word_vectors(args, splits, segmenter):
    """Public vectors by default; pooled client texts only when explicitly asked (with a warning)."""
    if args.w2v and args.w2v_from_clients:
        raise SystemExit("give --w2v or --w2v-from-clients, not both")
    if args.w2v:
        return load_vectors(args.w2v), args.w2v
    if args.w2v_from_clients:
        print("WARNING: --w2v-from-clients trains the vocabulary and vectors on the clients' "
              "pooled private training texts. That breaks the federated privacy model (the "
              "server sees every hospital's text); use it only for experiments.")
        texts = [t["sentence"] for d in splits["train"] for t in d.turns]
        return train_word2vec(segmenter.cut_all(texts), vector_size=64, seed=args.seed), \
            "pooled client texts"
    if os.path.abspath(args.data) != os.path.abspath(SAMPLE_DIR):
        print("note: no --w2v given; using the small vectors trained on the embedded public "
              "sample. Pass --w2v with real medical vectors (e.g. Chinese-Word2vec-Medicine) "
              "for the real corpus.")
    return load_vectors(SAMPLE_VECTORS), SAMPLE_VECTORS


def prepare(args):
    """Loads, splits and encodes IMCS. Returns (data, stats, embedding matrix, info)."""
    splits = imcs.load_imcs(args.data)
    if "train" not in splits:
        raise SystemExit(f"{args.data}: no training split (a file named *train*.json)")
    segmenter = MedicalSegmenter(terms=imcs.symptom_norms(splits["train"]))
    kv, source = word_vectors(args, splits, segmenter)
    vocab = Vocabulary.from_vectors(kv)
    eval_split = "test" if "test" in splits else "dev"
    data, stats = build_imcs_federated(
        splits, args.task, segmenter=segmenter, vocab=vocab, max_len=args.max_len,
        partition=args.partition, num_clients=args.clients, alpha=args.alpha, seed=args.seed,
        eval_split=eval_split)
    y_train, y_test = data.pooled("train")[1], data.pooled("test")[1]
    majority = np.bincount(y_train).argmax()
    sample_tokens = segmenter.cut_all(imcs.to_examples(splits["train"][:50], args.task)["text"])
    info = {"vectors": source, "vocab_size": len(vocab), "vector_dim": kv.vector_size,
            "oov_rate_sample": round(vocab.oov_rate(sample_tokens), 4), "eval_split": eval_split,
            "majority_class_test_accuracy": float(np.mean(y_test == majority)),
            "train_examples": int(len(y_train)), "test_examples": int(len(y_test))}
    return data, stats, vocab.embedding_matrix(kv), info


def print_partition(stats, task):
    """Prints per-client sizes and label mix."""
    names = list(imcs.label_names(task))
    train = stats[stats["split"] == "train"].set_index("client")
    test = stats[stats["split"] == "test"].set_index("client")
    table = pd.DataFrame({"dialogues": train["dialogues"], "train": train["examples"],
                          "test": test["examples"]})
    if len(names) <= 4:
        for n in names:
            table[n] = train[n]
    else:
        top = train[names].idxmax(axis=1)
        table["largest label"] = top
        table["share"] = (train[names].max(axis=1) / train["examples"]).round(2)
    print(table.to_string())


def run(args, model_fn_for, paper_rows, table_title):
    """Runs the IMCS experiment and prints/writes its tables. Returns the summary dict."""
    import tensorflow as tf
    from tffre.runner import run_experiment
    from tffre.runtime import federated_runtime

    start = time.perf_counter()
    if args.max_len is None:
        args.max_len = 192 if args.task == "diagnosis" else 16
    tf.keras.utils.set_random_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    data, stats, matrix, info = prepare(args)
    print(f"\n{data.name}: {info['train_examples']} train / {info['test_examples']} test "
          f"examples; vocabulary {info['vocab_size']} x {info['vector_dim']} from {info['vectors']}")
    print_partition(stats, args.task)
    stats.to_csv(os.path.join(args.out, "partition.csv"), index=False)
    plot_partition(stats, os.path.join(args.out, "partition.png"),
                   list(imcs.label_names(args.task)), title=data.name,
                   legend_names=list(imcs.label_names(args.task, english=True)))
    model_fn = model_fn_for(matrix, data.num_classes, args.max_len)
    hparams = {"learning_rate": args.learning_rate, "mu": args.mu, "stepsize": args.stepsize,
               "num_epochs": args.num_epochs, "num_iters": args.num_iters}
    with federated_runtime():
        summary = run_experiment(
            data, model_fn, loss=tf.keras.losses.SparseCategoricalCrossentropy(),
            algorithm_names=args.algorithms.split(","), num_rounds=args.num_rounds,
            clients_per_round=args.clients_per_round, batch_size=args.batch_size,
            seed=args.seed, eval_every=args.eval_every, hparams=hparams, out_dir=args.out,
            progress=not args.no_progress, title=f"{data.name}: {table_title}")
    summary.update(task=args.task, data=args.data, partition=args.partition, alpha=args.alpha,
                   clients=args.clients, wall_seconds=round(time.perf_counter() - start, 1),
                   **info)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
    print_tables(summary, paper_rows, table_title)
    return summary


def print_tables(summary, paper_rows, title):
    """Table 10-style (max acc, min loss) and Table 11-style (round ms, bytes) tables."""
    print(f"\n{title} — max test accuracy and min train loss "
          f"(majority-class baseline {summary['majority_class_test_accuracy']:.4f})")
    print(f"{'algorithm':<10} {'max acc':>8} {'round':>6} {'min loss':>9}   paper")
    for name, s in summary["algorithms"].items():
        paper = paper_rows.get(name)
        paper_text = "" if paper is None else (
            f"{paper[0]:.4f} / {paper[1]:.4f}" if isinstance(paper, tuple) else f"{paper:.2f}")
        print(f"{name:<10} {s['max_test_accuracy']:>8.4f} {s['round_of_max_accuracy']:>6d} "
              f"{s['min_train_loss']:>9.4f}   {paper_text}")
    print(f"\ncommunication — mean round time and bytes per round")
    print(f"{'algorithm':<10} {'mean ms':>9} {'paper ms':>9} {'uploaded':>12} {'broadcast':>12}")
    for name, s in summary["algorithms"].items():
        paper = PAPER_TABLE_11.get(name)
        print(f"{name:<10} {s['mean_round_ms']:>9.1f} {'' if paper is None else f'{paper:.1f}':>9} "
              f"{s['bytes_uploaded_per_round']:>12,.0f} {s['bytes_broadcast_per_round']:>12,.0f}")
    rss = summary["peak_rss_mib"]
    print(f"\nwall time {summary['wall_seconds']:.0f} s; peak RSS {rss['python']:.0f} MiB (python) "
          f"+ {rss['tff_worker']:.0f} MiB (TFF worker)")
