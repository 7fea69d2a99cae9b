"""Writes what `fedavg.py` needs to run a relation comparison on a machine without TensorFlow.

    python benchmarks/torch_reference/export.py --data ROOT/biobert_RE/GAD/1 --out ref/
    python benchmarks/torch_reference/export.py ... --half   # weights as float16 (half the bytes)
    python benchmarks/torch_reference/export.py --dataset chemprot --data ROOT/scibert_chemprot \
        --out ref/ --half --max-len 128    # any relation set tffre reads, multi-class too

The GPU machines lent to this project hold PyTorch but no TensorFlow (docs/real-corpora.md,
"At the papers' scale on a GPU"), so tffre itself cannot run there. This script runs tffre's
own data path once, here: the dataset's loader and seeded dev slice
(`load_relation_splits`), the relation tokenizer with its entity markers (`RETokenizer`) and
the client splits (`dirichlet_label_split`, `iid_split`) of every seed. It writes them to
`data.npz`, with the encoder's config, vocabulary and weights, so that the PyTorch
transcription trains on exactly the examples and clients a tffre run of the same seed has.

`data.npz` holds, for each seed s: `s{s}_{split}_x` (the packed int32 [n, 4, max_len]
array: ids, attention mask, e1 mask, e2 mask), `s{s}_{split}_y`, and for each partition p
(`alpha0.5`, `iid`, ...) `s{s}_{p}_index` and `s{s}_{p}_offsets` (client k holds train rows
index[offsets[k]:offsets[k+1]]); and `labels`, `vocab_size` (the tokenizer's, markers
included), `negative_label`, and FedCB's class distributions `fedcb_mu` and `fedcb_var`
([C, D]: Eq. 2 with the diagonal Σ) with its default temperature `fedcb_tau`.

With `--server-fraction F` it also holds FedED's server set D_v, `s{s}_dv_index` (the train
rows tffre's `--server-fraction F` moves to the server), and the partition `dv{K}`: tffre's
IID split of the other train rows over K = `--dv-clients` clients (FedED's GAD setting: F =
0.2, K = 50); and FedED's defaults `feded_tau` (the teacher's temperature) and `feded_kl`.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def export(dataset, data, out, *, seeds, alphas, iid, clients, max_len, half,
           server_fraction=0.0, dv_clients=50):
    """Writes `out/data.npz` and `out/encoder/` (see the module docstring); returns the
    summary printed and written to `out/export.json`."""
    from tffre.data.partition import dirichlet_label_split, iid_split
    from tffre.data.sentence_sets import DEV_FRACTION, load_relation_splits
    from tffre.text.relation_tokenizer import RETokenizer, default_encoder_dir

    encoder_dir = default_encoder_dir()
    arrays, labels, vocab, summary = {}, None, None, {"seeds": {}}
    for seed in seeds:
        splits, labels = load_relation_splits(dataset, data, seed=seed, dev_fraction=DEV_FRACTION)
        tokenizer = RETokenizer.from_pretrained(
            encoder_dir, max_length=max_len,
            entity_types=RETokenizer.entity_types_of(splits["train"]))
        vocab = tokenizer.vocab_size
        index = {label: i for i, label in enumerate(labels)}
        for name, frame in splits.items():
            arrays[f"s{seed}_{name}_x"] = tokenizer.encode(frame)
            arrays[f"s{seed}_{name}_y"] = frame["label"].map(index).to_numpy(np.int32)
        y = arrays[f"s{seed}_train_y"]
        parts = {f"alpha{a}": dirichlet_label_split(y, clients, a, seed) for a in alphas}
        if iid:
            parts["iid"] = iid_split(len(y), clients, seed)
        if server_fraction:
            server, rest = server_rows(splits, labels, seed, server_fraction)
            arrays[f"s{seed}_dv_index"] = server
            parts[f"dv{dv_clients}"] = [rest[p] for p in iid_split(len(rest), dv_clients, seed)]
        for name, split in parts.items():
            arrays[f"s{seed}_{name}_index"] = np.concatenate(split).astype(np.int32)
            arrays[f"s{seed}_{name}_offsets"] = np.cumsum([0] + [len(p) for p in split])
        summary["seeds"][seed] = {name: int(len(frame)) for name, frame in splits.items()}
    # FedCB's frozen classifier (Eq. 2: the class concepts in the text prompts, embedded by
    # the encoder), by tffre's own code, since the GPU machine has no TensorFlow to embed them.
    from tffre.algorithms.fedcb import FedCB, concept_distributions, prompt_templates
    from tffre.data.concepts import concepts_for
    arrays["fedcb_mu"], arrays["fedcb_var"] = concept_distributions(
        concepts_for(list(labels), None), prompt_templates("text"))
    arrays["fedcb_tau"] = FedCB.Hparams().classifier_temperature   # tffre's default tau
    from tffre.algorithms.feded import FedED
    arrays["feded_tau"] = FedED.Hparams().teacher_temperature
    arrays["feded_kl"] = FedED.Hparams().kl_weight
    os.makedirs(out, exist_ok=True)
    np.savez_compressed(os.path.join(out, "data.npz"), labels=np.array(labels),
                        vocab_size=vocab, negative_label=0, **arrays)
    target = os.path.join(out, "encoder")
    os.makedirs(target, exist_ok=True)
    for name in ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json"):
        shutil.copy(os.path.join(encoder_dir, name), target)
    from safetensors.numpy import load_file, save_file
    weights = load_file(os.path.join(encoder_dir, "model.safetensors"))
    if half:   # 91 MB of float32 does not fit a 64 MiB transfer; fedavg.py trains in float32
        weights = {k: v.astype(np.float16) if v.dtype == np.float32 else v
                   for k, v in weights.items()}
    # transformers reads a PyTorch checkpoint only with this metadata (the original has it)
    save_file(weights, os.path.join(target, "model.safetensors"), metadata={"format": "pt"})
    summary.update(dataset=dataset, data=data, labels=list(labels), vocab_size=int(vocab),
                   max_len=max_len, clients=clients, alphas=list(alphas), iid=iid,
                   server_fraction=server_fraction, dv_clients=dv_clients,
                   weights="float16" if half else "float32")
    with open(os.path.join(out, "export.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return summary


def server_rows(splits, labels, seed, fraction):
    """(D_v's train rows, the clients' train rows), both sorted: what tffre's
    ``--server-fraction`` (:func:`tffre.tasks.relations.server_split`) does to ``splits``'s
    train for ``seed``, run on a copy that carries each row's number."""
    from types import SimpleNamespace
    from tffre.tasks.relations import server_split
    numbered = dict(splits, train=splits["train"].assign(_row=np.arange(len(splits["train"]))))
    cfg = SimpleNamespace(dataset=None, run=SimpleNamespace(seed=seed),
                          options=SimpleNamespace(server_data=None, server_fraction=fraction))
    server, _ = server_split(cfg, numbered, labels)
    return (server["_row"].to_numpy(np.int64), numbered["train"]["_row"].to_numpy(np.int64))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="gad")
    parser.add_argument("--data", required=True, help="the dataset's file or folder")
    parser.add_argument("--out", required=True)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--alphas", default="0.5,0.05")
    parser.add_argument("--iid", action="store_true", help="also write the IID split")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--max-len", type=int, default=128)
    parser.add_argument("--half", action="store_true", help="store the weights as float16")
    parser.add_argument("--server-fraction", type=float, default=0.0,
                        help="FedED's D_v: this seeded fraction of train, as tffre's flag")
    parser.add_argument("--dv-clients", type=int, default=50,
                        help="K of the IID split of the rest (partition dvK)")
    args = parser.parse_args(argv)
    summary = export(args.dataset, args.data, args.out,
                     seeds=[int(s) for s in args.seeds.split(",")],
                     alphas=[float(a) for a in args.alphas.split(",") if a],
                     iid=args.iid, clients=args.clients, max_len=args.max_len, half=args.half,
                     server_fraction=args.server_fraction, dv_clients=args.dv_clients)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
