"""Document-level biomedical relation extraction (FedLCC Tables 3-5, 7) on a Hugging Face encoder.

Loads CDR, GDA or CHR (PubTator or EoG ``.data``) or DocRED-style JSON with
:func:`tffre.data.documents.load_docre` (the embedded, invented CDR-style sample
by default for ``--dataset cdr``), marks and packs the documents with
:class:`tffre.text.document_features.DocREFeaturizer`, splits the training
documents over the clients by the paper's structural-entropy rule (Sect. 4.2,
:func:`tffre.data.doc_graph.structural_entropy_split`, ``--entropy-form``) or
IID, and builds the ATLOP-style model of :func:`tffre.models.documents.build_docre_model`
(pretrained encoder weights enter the server state after ``initialize``).

The client loop sees ``x`` = the dict of model inputs and ``y`` = labels ⊕
pair mask (:func:`tffre.models.documents.pack_targets`), trained with
:class:`tffre.models.documents.DocRELoss` (``--loss bce``, Eq. 11, or ``softmax``,
the authors' code). The global model is scored by the "docre" evaluation
(:class:`tffre.evaluation.DocREEvaluator`): P/R/F1 of the relations over the
candidate pairs, the intra-/inter-sentence F1 (from each pair's
``pair_intra``, kept beside the data as an annotation) and, for DocRED, Ign F1
(``pair_in_train``, from the training facts).

Choices where the data leaves one open:

* **Relation types** are those annotated in the training split (CDR: CID;
  GDA: GDA), in sorted order.
* **Candidate pairs**: for CDR, GDA and CHR, the ordered (subject type, object
  type) combinations of the training relations (CDR: Chemical -> Disease), as
  the corpora's candidate pairs are; for DocRED every ordered pair of entities.
* **Splits**: without a dev split, a seeded 20% of the training documents is
  held out as dev (FedLCC: "we further divide the training set into a
  training set and a development set in a ratio of 8 to 2" for GDA). DocRED's
  test labels are not public: as the paper's Table 7, its dev split is scored
  as the test set and a seeded 20% of train serves for selection.
* **Row limits** (mentions, entities, pairs per document) are fitted to the
  data, so nothing but tokens beyond ``--max-len`` is cut; the cuts are
  counted (``summary.json`` -> ``featurizer``).
* **Empty clients**: an entropy interval without documents leaves its client
  empty; it is dropped (printed), the others keep their interval's index.

Dev and test documents are dealt evenly over the clients and pooled by the
evaluation (a common test set, as the paper's).
"""

import os

import numpy as np

from tffre.config import SAMPLE
from tffre.experiments import Job

DEFAULT_MAX_LEN = 1024   # ATLOP's and the FedLCC authors' document length (two 512 windows)
HOLDOUT = 0.2            # FedLCC: GDA's training set divided 8:2 into train and dev
# A relation type's pairs and the candidate pairs: DocRED scores every ordered entity pair.
ALL_PAIRS = ("docred",)


def data_path(cfg):
    """The file or folder ``cfg.data`` names (the embedded sample for "sample")."""
    from tffre.data.documents import sample_path
    return sample_path() if cfg.data == SAMPLE else cfg.data


def _holdout(documents, seed, salt):
    """(kept, held out): a seeded HOLDOUT share of ``documents`` held out, order kept."""
    order = np.random.RandomState([seed, salt]).permutation(len(documents))
    cut = int(round(len(documents) * HOLDOUT))
    held = set(order[:cut].tolist())
    return ([d for i, d in enumerate(documents) if i not in held],
            [d for i, d in enumerate(documents) if i in held])


def load_splits(cfg):
    """{"train", "dev", "test": [Document]} of ``cfg``, and the notes on what was held out."""
    from tffre.data.documents import load_docre
    loaded = load_docre(data_path(cfg))
    splits = dict(loaded) if isinstance(loaded, dict) else {"train": loaded}
    notes = []
    if not splits.get("train"):
        raise ValueError(f"{data_path(cfg)}: no training documents (a train file, or a file "
                         f"of training documents)")
    if cfg.dataset == "docred":
        if "dev" not in splits:
            raise ValueError(f"{data_path(cfg)}: DocRED needs its dev split (the paper's "
                             f"Table 7 scores it; the test labels are not public)")
        splits["test"] = splits.pop("dev")
        notes.append("DocRED: the dev split is scored as the test set (FedLCC Table 7)")
    elif "test" not in splits:
        raise ValueError(f"{data_path(cfg)}: no test split (a file whose name holds 'test')")
    if "dev" not in splits:
        train, dev = _holdout(splits["train"], cfg.seed, 13)
        notes.append(f"held out {len(dev)} of {len(splits['train'])} training documents "
                     f"({HOLDOUT:.0%}, seeded) as dev, for choosing the round")
        splits["train"], splits["dev"] = train, dev
    return {k: splits[k] for k in ("train", "dev", "test")}, notes


def relation_schema(dataset, train):
    """(relation types, pair types or None) read off the training documents."""
    types = sorted({r.type for doc in train for r in doc.relations})
    if not types:
        raise ValueError("the training documents hold no relation")
    if dataset in ALL_PAIRS:
        return types, None
    pairs = set()
    for doc in train:
        kinds = doc.entity_types()
        pairs.update((kinds[r.id1], kinds[r.id2]) for r in doc.relations
                     if r.id1 in kinds and r.id2 in kinds)
    return types, sorted(pairs)


def facts_seen_in_training(featurizer, documents, facts):
    """int8 ``[n, P, R]``: 1 where (pair row, relation) is a fact of ``facts``
    (:func:`tffre.data.documents.fact_keys` of the training set) by some mention names of the
    pair's entities, DocRED's rule for Ign F1."""
    shapes = featurizer.shapes()
    out = np.zeros((len(documents),) + shapes["labels"], np.int8)
    for row, doc in enumerate(documents):
        entities = doc.entities()
        names = {eid: {doc.mentions[m].text for m in idx} for eid, idx in entities.items()}
        for p, (s, o) in enumerate(featurizer.pair_ids(doc)):
            for r, rtype in enumerate(featurizer.relation_types):
                out[row, p, r] = any((a, b, rtype) in facts for a in names[s] for b in names[o])
    return out


def partition(cfg, train):
    """(parts, EntropySplit or None, entropies): the clients' training document indices."""
    from tffre.data.doc_graph import (degree_entropy, document_graph, iid_split,
                                      structural_entropy_split)
    if cfg.partition == "structural-entropy":
        split = structural_entropy_split(train, cfg.clients, form=cfg.entropy_form)
        return split.parts(), split, split.entropies
    entropies = np.array([degree_entropy(document_graph(d), cfg.entropy_form) for d in train])
    return iid_split(len(train), cfg.clients, cfg.seed), None, entropies


def prepare(cfg):
    """Loads, featurizes and splits the document set of ``cfg``; returns the :class:`Job`."""
    import pandas as pd

    from tffre.data import FederatedData
    from tffre.data.doc_graph import describe_split, iid_split, plot_split
    from tffre.data.documents import fact_keys
    from tffre.models.documents import (DocRELoss, build_docre_model, docre_config_for,
                                    load_pretrained_encoder, model_inputs, pack_targets)
    from tffre.text.document_features import DocREFeaturizer
    from tffre.text.relation_tokenizer import default_encoder_dir

    splits, notes = load_splits(cfg)
    for note in notes:
        print(f"note: {note}")
    relation_types, pair_types = relation_schema(cfg.dataset, splits["train"])
    encoder_dir = cfg.encoder or default_encoder_dir()
    everything = [doc for docs in splits.values() for doc in docs]
    featurizer = DocREFeaturizer.for_documents(
        encoder_dir, relation_types, everything, max_length=cfg.max_len or DEFAULT_MAX_LEN,
        pair_types=pair_types)
    facts = fact_keys(splits["train"]) if cfg.dataset == "docred" else None
    arrays, stats = {}, {}
    for name, docs in splits.items():
        encoded = featurizer.encode(docs)
        stats[name] = dict(featurizer.last_stats)
        notes_of = {"pair_intra": encoded["pair_intra"]}
        if facts is not None:
            notes_of["pair_in_train"] = facts_seen_in_training(featurizer, docs, facts)
        arrays[name] = (model_inputs(encoded), pack_targets(encoded["labels"],
                                                            encoded["pair_mask"]), notes_of)

    parts, split, entropies = partition(cfg, splits["train"])
    kept = [k for k, part in enumerate(parts) if len(part)]
    dropped = [k for k in range(len(parts)) if k not in kept]
    if dropped:
        print(f"note: client(s) {', '.join(map(str, dropped))} got no training document "
              f"(empty entropy intervals) and are dropped: {len(kept)} clients")
    if len(kept) < cfg.clients_per_round:
        raise ValueError(f"--partition {cfg.partition}: only {len(kept)} of {cfg.clients} "
                         f"clients hold training documents, fewer than --clients-per-round "
                         f"{cfg.clients_per_round}; lower --clients or --clients-per-round")
    held_out = {name: iid_split(len(splits[name]), len(kept), cfg.seed + 1)
                for name in ("dev", "test")}

    def rows(name, index):
        x, y, notes_of = arrays[name]
        return ({k: v[index] for k, v in x.items()}, y[index],
                {k: v[index] for k, v in notes_of.items()})

    clients, annotations = {}, {}
    for j, k in enumerate(kept):
        cid = f"client_{k}"
        clients[cid], annotations[cid] = {}, {}
        for name, index in (("train", parts[k]), ("dev", held_out["dev"][j]),
                            ("test", held_out["test"][j])):
            x, y, notes_of = rows(name, index)
            clients[cid][name] = (x, y)
            annotations[cid][name] = notes_of
    skew = "IID" if cfg.partition == "iid" else f"structural entropy ({cfg.entropy_form})"
    source = "invented sample" if cfg.data == SAMPLE else cfg.data
    data = FederatedData(clients, num_classes=len(relation_types),
                         name=f"{cfg.dataset} ({source}), {len(kept)} clients, {skew}",
                         annotations=annotations)

    table = pd.DataFrame({
        "client": [f"client_{k}" for k in range(len(parts))],
        "documents": [len(p) for p in parts],
        "mean_entropy": [float(np.mean(entropies[p])) if len(p) else float("nan")
                         for p in parts]})
    if split is not None:
        table["entropy_interval"] = [split.interval(k) for k in range(len(parts))]
        print(describe_split(split))
    else:
        print(f"IID split, documents per client: {table['documents'].tolist()}")
    count = {name: {"documents": len(docs),
                    "pairs": int(arrays[name][1][..., -1].sum()),
                    "positive_pairs": int((arrays[name][1][..., :-1].max(-1)
                                           * arrays[name][1][..., -1]).sum())}
             for name, docs in splits.items()}
    info = {"labels": relation_types, "pair_types": pair_types, "encoder": encoder_dir,
            "max_len": featurizer.max_length, "loss": cfg.loss,
            "limits": {k: getattr(featurizer, k) for k in ("max_mentions", "max_entities",
                                                           "max_mentions_per_entity",
                                                           "max_pairs")},
            "featurizer": stats, "splits": count, "notes": notes,
            "partition": {"method": cfg.partition, "entropy_form": cfg.entropy_form,
                          "documents_per_client": table["documents"].tolist(),
                          "dropped_clients": dropped,
                          "edges": None if split is None else split.edges.tolist()}}
    cut = {name: {k: v for k, v in s.items() if k != "documents" and v}
           for name, s in stats.items()}
    print(f"\n{data.name}: " + ", ".join(
        f"{name} {c['documents']} documents / {c['pairs']} pairs ({c['positive_pairs']} "
        f"positive)" for name, c in count.items())
        + f"; relations {relation_types}; candidate pairs "
        + ("all" if pair_types is None else ", ".join(f"{s}->{o}" for s, o in pair_types))
        + f"; featurizer cuts {cut}")
    config = docre_config_for(featurizer, encoder_dir, loss=cfg.loss,
                              num_layers=cfg.encoder_layers,
                              freeze_embeddings=cfg.freeze_embedding)

    def model_fn():
        return build_docre_model(config)

    def write_extras(out_dir):
        table.to_csv(os.path.join(out_dir, "partition.csv"), index=False)
        if split is not None:   # FedLCC Figure 2: documents per client and entropy interval
            plot_split(split, os.path.join(out_dir, "partition.png"), title=data.name)

    return Job(data=data, model_fn=model_fn, loss=DocRELoss(cfg.loss),
               title=f"{data.name}, {os.path.basename(os.path.normpath(encoder_dir))}",
               label_names=relation_types, encoder=None, info=info, write_extras=write_extras,
               load_pretrained=lambda model: load_pretrained_encoder(model, encoder_dir),
               evaluation="docre")


SETTINGS = {"iid": "Federated Training (IID)",
            "structural-entropy": "Federated Training (Non-IID)"}


def results_table(runs):
    """FedLCC Tables 3-5's layout from finished runs: one row per (setting, method).

    ``runs``: [(partition, run folder)], each a :func:`tffre.experiments.run` output
    (``summary.json``). Columns: setting, method, our P / R / F1 (%, the test scores at the
    round of best dev F1), that round, our intra-/inter-sentence F1 (and Ign F1 where
    scored), and the paper's P / R / F1 for the dataset and setting ("-" where it has none:
    MOON, any intra/inter split). A centralised run is listed once, as "Centralised
    Training".
    """
    import pandas as pd

    from tffre import paper_tables
    from tffre.jsonio import read_json_object
    rows, centralised = [], False
    for part, folder in runs:
        summary = read_json_object(os.path.join(folder, "summary.json"), ValueError)
        dataset = summary["config"]["dataset"]
        _, paper = paper_tables.fedlcc_reference(dataset, part)
        for name, s in summary["algorithms"].items():
            if name == "Centralised":
                if centralised:
                    continue
                centralised = True
            row = {"setting": "Centralised Training" if name == "Centralised"
                   else SETTINGS.get(part, part), "method": name}
            for key in ("precision", "recall", "f1", "intra_f1", "inter_f1", "ign_f1"):
                value = s.get(f"test_{key}_at_best_dev")
                row[key] = None if value is None else round(100 * value, 2)
            row["round"] = s.get("round_of_best_dev_f1")
            ref = paper.get(name, {})
            for key, out in (("precision", "paper P"), ("recall", "paper R"),
                             ("test_f1", "paper F1")):
                row[out] = None if ref.get(key) is None else round(100 * ref[key], 2)
            rows.append(row)
    table = pd.DataFrame(rows)
    if "ign_f1" in table and table["ign_f1"].isna().all():
        table = table.drop(columns="ign_f1")   # Ign F1 is DocRED's
    return table
