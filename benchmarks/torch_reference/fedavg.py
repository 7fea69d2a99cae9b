"""FedCMC's Table 2 rows (FedAvgT, FedLC, FedRS, MOON, FedCMC), FedCB and the centralised
bound in PyTorch, at the papers' scale, for a GPU machine that has no TensorFlow.

    python fedavg.py --ref REF --out OUT --jobs fedavgt@alpha0.5,fedcmc@alpha0.05,centralised
        [--seeds 0,1,2] [--rounds 50] [--lr 5e-5] [--batch 8] [--deadline 480]
    # FedED's GAD setting (export.py --server-fraction 0.2 --dv-clients 50):
    python fedavg.py ... --jobs feded@dv50,fedavgt@dv50,centralised@dv50 --client-fraction 0.1
        --batch 4 --epochs 2 --representation cls_entities [--lr 2.5e-5] [--kl-weight 0]

This is *not* tffre: it is an independent transcription of eight of its rows, written so that
the papers' scale (full fine-tuning of every layer, FedCMC's 50 rounds at batch 8 and Adam
5e-5) can be measured on the GPU machines lent to this project, whose image holds PyTorch
and no TensorFlow (docs/real-corpora.md, "At the papers' scale on a GPU"). It reads what
`export.py` wrote with tffre's own data path (the same examples, dev slice, entity markers
and client splits as a tffre run of each seed) and mirrors tffre's choices:

* the model: the encoder's last hidden states, FedCMC Eq. 1's h = (sum of e1's word
  pieces) ⊕ (sum of e2's) (``--representation cls_entities``: FedED Eq. 1's h_[CLS] ⊕
  h_e1 ⊕ h_e2), dropout 0.1 and one linear classifier (Glorot-uniform kernel, zero bias, as
  Keras's Dense); the added marker tokens get N(0, 0.02) rows, as the TF encoder's
  initializer gives them;
* FedAvgT (FedCMC's FedAvg baseline): the round's clients (all, or ``--client-fraction``
  C of the K: max(1, round(C K)) drawn without replacement from RandomState([seed, round]),
  as tffre's sampler), each a fresh Adam (Keras's epsilon 1e-7) for ``--epochs`` local
  epochs over its shuffled examples, and the server's mean of the client models weighted by
  their example counts;
* FedLC: the same, with the loss on z_c - tau * max(n_c, 1)^(-1/4) (tffre.algorithms.fedlc);
* FedRS: the same, with the loss on s_c * z_c, s_c = 1 for a class the client holds and
  0.5 for one it lacks (the paper's binary form, tffre.algorithms.fedrs's default);
* MOON: the same plus mu = 1 times the mean over the batch of
  softplus((cos(h, h_prev) - cos(h, h_glob)) / 0.5), h_glob from the broadcast model and
  h_prev from the client's own model of its last round, both in inference mode and without
  gradient; 0 in a client's first round (tffre.algorithms.moon);
* FedCMC: the same plus mu = 1 times the batch mean of -log softmax(h · Θ̂^T)_y with Θ̂
  constant (FedCMC Eq. 14-15); after its epoch a client scores its classifier rows,
  d_c = mean over i != c of cos(Θ_c, Θ_i) (Eq. 10), and the server sets each Θ̂_c to the
  row of the client with the smallest d_c (Eq. 12-13; ties: the smaller row
  lexicographically, then the first client); Θ̂^0 is the initial classifier
  (tffre.algorithms.fedcmc);
* FedCB: the features (before dropout) -> a linear projection to the prompt encoder's width
  (Glorot-uniform, zero bias) -> L2 normalisation, h; logits tau * (h . mu_k + tau/2 *
  h^2 . var_k) from the frozen class distributions (FedCB Eq. 5, the diagonal Σ) that
  `export.py` computed with tffre's own code; the loss CE + tau^2/2 * h^2 . var_y (Eq. 4 as
  the authors compute it), tau tffre's default as `export.py` wrote it
  (tffre.algorithms.fedcb); the server FedAvgs what trains;
* FedED: the clients train as FedAvgT's and upload only their probabilities on D_v (in
  inference mode); the server averages them, z (Eq. 5), softens them, q = softmax(z / tau)
  (Eq. 4, tau tffre's default 0.25 as `export.py` wrote it), and from the round's starting
  model takes one pass over D_v in its order, batches of ``--batch``, with a fresh Adam on
  CE + lambda KL(q || p) (Eq. 6, lambda = 1, or ``--kl-weight`` as tffre's flag)
  (tffre.algorithms.feded); D_v is the train rows `export.py --server-fraction` moved to
  the server, on which no client trains;
* centralised: one Adam over the union of the clients' examples (``centralised@dv50``: of
  that partition's clients, so without D_v), one epoch a "round";
* the figure: test F1 at the round of best dev F1 (first best), the relation F1 of
  `tffre.metrics` (micro over the classes other than the negative one).

Each (job, seed) runs in its own process, all at once: a model this small is bound by
kernel launches, so several processes fill one GPU better than one. Every round appends one
JSON line to OUT/rounds.jsonl, so a run cut by its deadline still reports the rounds it
finished; `--deadline` stops a process before a round it has no time left for.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

# The repository root, for tffre.metrics (the script runs as benchmarks/torch_reference/fedavg.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# "cuda" on the GPU machine; a CPU runs the same code for a smoke test (--device cpu).
DEVICE = "cuda"

# The options whose default is tffre's, as export.py wrote it: {option: export.py's key}. Each
# is None unless given, and then passed on to every (job, seed) process.
EXPORTED_DEFAULTS = {"cb_tau": "fedcb_tau", "teacher_tau": "feded_tau", "kl_weight": "feded_kl"}


def exported(args, data, name):
    """Option ``name`` as given, or else tffre's value that export.py wrote to ``data``."""
    value = getattr(args, name)
    return float(data[EXPORTED_DEFAULTS[name]]) if value is None else value


def relation_f1(y_true, y_pred, negative_label=0):
    """The relation F1 of ``tffre.metrics.relation_f1`` (micro over the classes other than
    ``negative_label``; the positive class's F1 for a binary set), so the transcription's
    figures are scored exactly as tffre's. tffre.metrics needs numpy, pandas, scikit-learn
    and psutil, not TensorFlow, so it imports on the GPU image."""
    from tffre.metrics import relation_f1 as tffre_relation_f1
    return tffre_relation_f1(np.asarray(y_true).tolist(), np.asarray(y_pred).tolist(),
                             negative_label=negative_label)["f1"]


def fedcb_logits(h, mu, var, tau):
    """FedCB Eq. 5 for normalised h [b, D]: tau * (h mu^T + tau/2 * h^2 var^T), [b, K]
    (``var`` the diagonal Σ, [K, D])."""
    return tau * (h @ mu.T + 0.5 * tau * (h * h) @ var.T)


def distillation_loss(logits, labels, q, kl_weight):
    """FedED Eq. 6 on a batch: mean_i [-log p(y_i|s_i) + kl_weight * KL(q_i || p_i)],
    p = softmax(logits); entries where q is 0 add nothing (0 log 0 = 0)."""
    import torch
    import torch.nn.functional as F
    log_p = F.log_softmax(logits, dim=-1)
    kl = torch.where(q > 0, q * (torch.log(q) - log_p), torch.zeros_like(q)).sum(-1)
    return (F.nll_loss(log_p, labels, reduction="none") + kl_weight * kl).mean()


def build(encoder_dir, vocab_size, num_labels, seed, fedcb=None, representation="entity_sum"):
    """The relation model (see the module docstring) on the GPU, in float32; ``fedcb``:
    FedCB's (mu, var, tau), a frozen classifier in place of the linear one;
    ``representation``: "entity_sum" (2H features) or "cls_entities" (3H)."""
    import torch
    from transformers import BertModel

    class RelationModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = BertModel.from_pretrained(encoder_dir, add_pooling_layer=False)
            self.encoder.float()   # the weights may travel as float16
            old = self.encoder.get_input_embeddings().weight.shape[0]
            if vocab_size > old:
                self.encoder.resize_token_embeddings(vocab_size, mean_resizing=False)
                with torch.no_grad():
                    self.encoder.get_input_embeddings().weight[old:].normal_(0.0, 0.02)
            hidden = self.encoder.config.hidden_size
            width = (3 if representation == "cls_entities" else 2) * hidden
            self.dropout = torch.nn.Dropout(0.1)
            self.classifier = torch.nn.Linear(width, num_labels)
            torch.nn.init.xavier_uniform_(self.classifier.weight)
            torch.nn.init.zeros_(self.classifier.bias)
            # FedCB's head. The linear classifier above stays built, frozen and unused: its
            # initialisation draws from the seeded generator before the projection's, as in
            # the runs measured with this script.
            if fedcb is not None:
                mu, var, self.tau = fedcb
                self.classifier.requires_grad_(False)
                self.projection = torch.nn.Linear(width, mu.shape[1])
                torch.nn.init.xavier_uniform_(self.projection.weight)
                torch.nn.init.zeros_(self.projection.bias)
                self.register_buffer("mu", torch.as_tensor(mu, dtype=torch.float32))
                self.register_buffer("var", torch.as_tensor(var, dtype=torch.float32))

        def features(self, packed):
            """h of FedCMC Eq. 1, [b, 2H] (FedED Eq. 1, [b, 3H]): tffre's ``features``
            output (before dropout)."""
            hidden = self.encoder(input_ids=packed[:, 0], attention_mask=packed[:, 1]
                                  ).last_hidden_state
            sums = torch.matmul(packed[:, 2:4].float(), hidden).flatten(1)   # the sums
            if representation == "cls_entities":
                return torch.cat([hidden[:, 0], sums], dim=-1)
            return sums

        def forward(self, packed, with_features=False):
            features = self.features(packed)
            if fedcb is not None:   # FedCB's h and Eq. 5's logits; no dropout on h
                features = torch.nn.functional.normalize(self.projection(features), dim=-1)
                logits = fedcb_logits(features, self.mu, self.var, self.tau)
                return (features, logits) if with_features else logits
            logits = self.classifier(self.dropout(features))
            return (features, logits) if with_features else logits

    torch.manual_seed(seed)
    return RelationModel().to(DEVICE)


ALGORITHMS = ("fedavgt", "fedlc", "fedrs", "moon", "fedcmc", "fedcb", "feded")


def round_clients(num_clients, fraction, seed, round_num):
    """The clients of a round, as tffre.runner.sample_clients draws them: max(1, round(C K))
    of the K without replacement from RandomState([seed, round]), sorted (C = 1: all)."""
    m = max(1, int(np.floor(fraction * num_clients + 0.5)))
    rng = np.random.RandomState([seed, round_num])
    return sorted(rng.choice(num_clients, m, replace=False).tolist())


def local_loss(algorithm, features, logits, labels, *, margins=None, scales=None, vectors=None,
               z_glob=None, z_prev=None, variances=None, mu=1.0, moon_tau=0.5, cmc_tau=1.0,
               cb_tau=None):
    """One batch's client objective (the module docstring's list), a scalar tensor.

    ``margins`` (FedLC) and ``scales`` (FedRS) are [C]; ``vectors`` (FedCMC's Θ̂) is [C, 2H];
    ``z_glob`` and ``z_prev`` (MOON) are the frozen models' features, ``z_prev`` None in a
    client's first round; ``variances`` (FedCB's diagonal Σ) is [C, D] and ``cb_tau`` its
    temperature, ``features`` then FedCB's normalised h."""
    import torch
    import torch.nn.functional as F
    if algorithm == "fedlc":
        logits = logits - margins
    elif algorithm == "fedrs":
        logits = logits * scales
    loss = F.cross_entropy(logits, labels)
    if algorithm == "moon" and z_prev is not None:
        # MOON's l_con, -log(e^{s_g/tau} / (e^{s_g/tau} + e^{s_p/tau})), as a softplus
        s_glob = F.cosine_similarity(features, z_glob, dim=-1)
        s_prev = F.cosine_similarity(features, z_prev, dim=-1)
        loss = loss + mu * F.softplus((s_prev - s_glob) / moon_tau).mean()
    elif algorithm == "fedcmc":
        loss = loss + mu * F.cross_entropy(features @ vectors.detach().T / cmc_tau, labels)
    elif algorithm == "fedcb":   # Eq. 4's variance term, h^T Σ_y h
        loss = loss + 0.5 * cb_tau ** 2 * ((features * features) * variances[labels]).sum(1).mean()
    return loss


def local_similarity(rows):
    """FedCMC Eq. 10 in numpy: [C, D] class vectors -> [C], the mean cosine of each row to the
    others (a zero row: cosine 0)."""
    rows = np.asarray(rows, np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit = rows / np.where(norms > 0, norms, 1.0)
    cos = unit @ unit.T
    return (cos.sum(1) - np.diag(cos)) / max(len(rows) - 1, 1)


def major_vectors(client_rows):
    """FedCMC Eq. 12-13: for each class, the row of the client whose score d_c (Eq. 10) is
    the smallest; ties go to the smaller row lexicographically, then the first client.
    ``client_rows``: K arrays [C, D]. Returns [C, D]."""
    scores = [local_similarity(r) for r in client_rows]
    return np.stack([min(((scores[k][c], tuple(r[c]), k) for k, r in enumerate(client_rows)))[1]
                     for c in range(len(client_rows[0]))]).astype(np.float32)


def assign(targets, values):
    """Copies ``values`` into the tensors ``targets`` (parameters), pair by pair, without
    gradient."""
    import torch
    with torch.no_grad():
        for target, value in zip(targets, values):
            target.copy_(value)


def run_one(args):
    """One (job, seed): trains, evaluates every round, appends to OUT/rounds.jsonl."""
    import torch
    start = time.perf_counter()
    algorithm, _, partition = args.one.partition("@")
    if algorithm not in ALGORITHMS + ("centralised",):
        raise SystemExit(f"unknown algorithm {algorithm!r}: one of {ALGORITHMS} or centralised")
    data = np.load(os.path.join(args.ref, "data.npz"))
    s, negative = args.seed, int(data["negative_label"])
    # The inputs stay in host memory: each batch is cut to its longest row there, so no step
    # waits on the GPU to learn its length.
    x = {n: data[f"s{s}_{n}_x"].astype(np.int64) for n in ("train", "dev", "test")}
    y = {n: data[f"s{s}_{n}_y"].astype(np.int64) for n in ("train", "dev", "test")}
    num_labels = len(data["labels"])
    if args.limit:   # a smoke test: the first examples of each split
        x = {n: v[:args.limit] for n, v in x.items()}
        y = {n: v[:args.limit] for n, v in y.items()}
    if algorithm == "centralised" and not partition:
        clients = [np.arange(len(y["train"]))]
    else:
        index, offsets = data[f"s{s}_{partition}_index"], data[f"s{s}_{partition}_offsets"]
        clients = [index[offsets[k]:offsets[k + 1]] for k in range(len(offsets) - 1)]
        clients = [c[c < len(y["train"])] for c in clients]   # --limit
        if algorithm == "centralised":   # the union of the partition's clients
            clients = [np.sort(np.concatenate(clients))]
    server = None   # FedED's D_v: train rows no client holds
    if algorithm == "feded":
        server = data[f"s{s}_dv_index"]
        server = server[server < len(y["train"])]
    lengths = {n: v[:, 1].sum(1) for n, v in x.items()}

    def batch(name, rows):
        packed = x[name][rows, :, :max(int(lengths[name][rows].max()), 1)]
        return (torch.from_numpy(packed).to(DEVICE, non_blocking=True),
                torch.from_numpy(y[name][rows]).to(DEVICE, non_blocking=True))
    torch.backends.cuda.matmul.allow_tf32 = True
    cb_tau = exported(args, data, "cb_tau")
    fedcb = (data["fedcb_mu"], data["fedcb_var"], cb_tau) if algorithm == "fedcb" else None
    model = build(os.path.join(args.ref, "encoder"), int(data["vocab_size"]), num_labels, s,
                  fedcb=fedcb, representation=args.representation)
    if algorithm == "feded":   # tffre's defaults, as export.py wrote them
        teacher_tau = exported(args, data, "teacher_tau")
        kl_weight = exported(args, data, "kl_weight")
    params = [p for p in model.parameters() if p.requires_grad]
    generator = np.random.default_rng(s)
    persistent = torch.optim.Adam(params, lr=args.lr, eps=1e-7, fused=DEVICE == "cuda") \
        if algorithm == "centralised" else None
    # FedCMC's Θ̂ (Θ̂^0: the initial classifier, Algorithm 1 line 2); MOON's frozen copies
    # (inference mode: no dropout) and each client's model of its last round (on the device).
    vectors = model.classifier.weight.detach().clone() if algorithm == "fedcmc" else None
    global_copy = previous_copy = None
    previous_state = {}
    if algorithm == "moon":
        import copy
        assert len(params) == len(list(model.parameters())), "the copies pair by position"
        global_copy, previous_copy = copy.deepcopy(model).eval(), copy.deepcopy(model).eval()
        for p in list(global_copy.parameters()) + list(previous_copy.parameters()):
            p.requires_grad_(False)

    def local_epoch(rows, optimizer, extra):
        model.train()
        rows = generator.permutation(rows)
        for i in range(0, len(rows), args.batch):
            inputs, labels = batch("train", rows[i:i + args.batch])
            features, logits = model(inputs, with_features=True)
            frozen = {}
            if algorithm == "moon" and extra.get("previous") is not None:
                with torch.no_grad():
                    frozen = {"z_glob": global_copy.features(inputs),
                              "z_prev": extra["previous"].features(inputs)}
            loss = local_loss(algorithm, features, logits, labels,
                              margins=extra.get("margins"), scales=extra.get("scales"),
                              vectors=vectors, cb_tau=cb_tau,
                              variances=model.var if algorithm == "fedcb" else None, **frozen)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    @torch.no_grad()
    def logits_of(name, rows):
        """The model's logits on ``rows`` of split ``name``, in inference mode, [len(rows), C]
        on the device."""
        model.eval()
        order = np.argsort(lengths[name][rows], kind="stable")   # similar lengths batch together
        out = torch.empty(len(rows), num_labels, device=DEVICE)
        for i in range(0, len(order), 256):
            chunk = order[i:i + 256]
            out[torch.from_numpy(chunk).to(DEVICE)] = model(batch(name, rows[chunk])[0])
        return out

    def predict(name):
        return logits_of(name, np.arange(len(y[name]))).argmax(-1).cpu().numpy()

    def distil(teacher):
        """FedED's server (Eq. 4 and 6): one pass over D_v from the current model."""
        q = torch.softmax(teacher / teacher_tau, -1)
        optimizer = torch.optim.Adam(params, lr=args.lr, eps=1e-7, fused=DEVICE == "cuda")
        model.train()
        for i in range(0, len(server), args.batch):
            inputs, labels = batch("train", server[i:i + args.batch])
            loss = distillation_loss(model(inputs), labels, q[i:i + args.batch], kl_weight)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    log = open(os.path.join(args.out, "rounds.jsonl"), "a", buffering=1)
    last = 0.0
    for round_num in range(1, args.rounds + 1):
        if time.perf_counter() - start + 1.2 * last > args.deadline:
            break
        began = time.perf_counter()
        if algorithm == "centralised":
            local_epoch(clients[0], persistent, {})
        else:
            start_state = [p.detach().clone() for p in params]
            # FedED averages probabilities, not models: no running sum of weights for it.
            total = None if algorithm == "feded" else [torch.zeros_like(p) for p in params]
            weight, client_rows, teacher = 0, [], 0.0
            if global_copy is not None:
                assign(global_copy.parameters(), start_state)
            for k in round_clients(len(clients), args.client_fraction, s, round_num):
                rows = clients[k]
                if not len(rows):
                    continue
                assign(params, start_state)
                counts = np.bincount(y["train"][rows], minlength=num_labels)
                extra = {}
                if algorithm == "fedlc":
                    extra["margins"] = torch.tensor(args.tau * np.maximum(counts, 1) ** -0.25,
                                                    dtype=torch.float32).to(DEVICE)
                elif algorithm == "fedrs":
                    extra["scales"] = torch.tensor(np.where(counts > 0, 1.0, args.restriction),
                                                   dtype=torch.float32).to(DEVICE)
                elif algorithm == "moon" and k in previous_state:
                    assign(previous_copy.parameters(), previous_state[k])
                    extra["previous"] = previous_copy
                optimizer = torch.optim.Adam(params, lr=args.lr, eps=1e-7,
                                             fused=DEVICE == "cuda")
                for _ in range(args.epochs):
                    local_epoch(rows, optimizer, extra)
                if algorithm == "feded":   # the upload: probabilities on D_v only
                    teacher = teacher + torch.softmax(logits_of("train", server), -1)
                    weight += 1
                    continue
                with torch.no_grad():
                    for t, p in zip(total, params):
                        t.add_(p, alpha=float(len(rows)))
                    if algorithm == "moon":
                        previous_state[k] = [p.detach().clone() for p in params]
                    if algorithm == "fedcmc":
                        # A copy: on the CPU, .cpu().numpy() is a view of the parameter,
                        # which the next client's training and the mean overwrite.
                        client_rows.append(model.classifier.weight.detach().cpu().numpy().copy())
                weight += len(rows)
            if algorithm == "feded":   # Eq. 5's mean, distilled from the round's start
                assign(params, start_state)
                if weight:
                    distil(teacher / weight)
            else:
                assign(params, [t / weight for t in total])
            if algorithm == "fedcmc":
                vectors = torch.from_numpy(major_vectors(client_rows)).to(DEVICE)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        last = time.perf_counter() - began
        f1 = {n: relation_f1(y[n], predict(n), negative) for n in ("dev", "test")}
        log.write(json.dumps({"job": args.one, "seed": s, "round": round_num,
                              "dev_f1": f1["dev"], "test_f1": f1["test"],
                              "round_seconds": round(last, 2),
                              "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20)
                              if DEVICE == "cuda" else 0,
                              "clients": len(clients)}) + "\n")


def summarise(path, jobs, seeds):
    """{job: figures}: test F1 at best dev (mean, sd, per seed), rounds reached, seconds a
    round, peak GPU memory, from OUT/rounds.jsonl."""
    rows = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
    table = {}
    for job in jobs:
        per_seed = {}
        for s in seeds:
            mine = [r for r in rows if r["job"] == job and r["seed"] == s]
            if mine:
                best = max(mine, key=lambda r: r["dev_f1"])   # max() keeps the first best
                per_seed[s] = {"test_f1": best["test_f1"], "round": best["round"],
                               "rounds": len(mine), "max_test_f1": max(r["test_f1"] for r in mine),
                               "round_seconds": float(np.median([r["round_seconds"]
                                                                 for r in mine])),
                               "peak_gpu_mib": max(r["peak_gpu_mib"] for r in mine)}
        f1 = [v["test_f1"] for v in per_seed.values()]
        table[job] = {"mean": float(np.mean(f1)) if f1 else None,
                      "sd": float(np.std(f1, ddof=1)) if len(f1) > 1 else None,
                      "seeds": per_seed}
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True, help="export.py's folder")
    parser.add_argument("--out", required=True)
    parser.add_argument("--jobs", default="fedavgt@alpha0.5,fedavgt@alpha0.05,centralised",
                        help="ALGORITHM@PARTITION (fedavgt, fedlc, fedrs, moon, fedcmc, fedcb) or "
                        "centralised, comma-separated")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tau", type=float, default=1.0, help="FedLC's calibration")
    parser.add_argument("--restriction", type=float, default=0.5,
                        help="FedRS's scale of a class the client lacks")
    parser.add_argument("--cb-tau", type=float, default=None,
                        help="FedCB's temperature (default: tffre's, as export.py wrote it)")
    parser.add_argument("--client-fraction", type=float, default=1.0,
                        help="C: the fraction of the clients drawn each round (1: all)")
    parser.add_argument("--epochs", type=int, default=1, help="local epochs a round")
    parser.add_argument("--representation", default="entity_sum",
                        choices=("entity_sum", "cls_entities"))
    parser.add_argument("--teacher-tau", type=float, default=None,
                        help="FedED's teacher temperature (default: tffre's, as export.py "
                        "wrote it)")
    parser.add_argument("--kl-weight", type=float, default=None,
                        help="FedED's lambda in Eq. 6 (default: tffre's, as export.py wrote it; "
                        "0: the student on D_v's labels alone)")
    parser.add_argument("--deadline", type=float, default=480.0,
                        help="seconds after which a process starts no new round")
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test")
    parser.add_argument("--limit", type=int, default=0,
                        help="a smoke test: the first N examples of each split (0: all)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    os.makedirs(args.out, exist_ok=True)
    if args.one:
        return run_one(args)
    jobs, seeds = args.jobs.split(","), [int(s) for s in args.seeds.split(",")]
    began = time.perf_counter()
    common = ["--ref", args.ref, "--out", args.out, "--rounds", str(args.rounds),
              "--lr", str(args.lr), "--batch", str(args.batch), "--tau", str(args.tau),
              "--restriction", str(args.restriction),
              "--deadline", str(args.deadline), "--device", args.device,
              "--limit", str(args.limit), "--client-fraction", str(args.client_fraction),
              "--epochs", str(args.epochs), "--representation", args.representation]
    for name in EXPORTED_DEFAULTS:
        if getattr(args, name) is not None:
            common += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    procs = [subprocess.Popen([sys.executable, __file__, "--one", job, "--seed", str(s)]
                              + common) for job in jobs for s in seeds]
    codes = [p.wait() for p in procs]
    table = summarise(os.path.join(args.out, "rounds.jsonl"), jobs, seeds)
    report = {"seconds": round(time.perf_counter() - began), "exit_codes": codes,
              "scale": {"rounds": args.rounds, "lr": args.lr, "batch": args.batch,
                        "epochs": args.epochs, "client_fraction": args.client_fraction,
                        "representation": args.representation, "processes": len(procs)},
              "jobs": table}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(report, f, indent=1)
    for job, fig in table.items():
        seeds_text = ", ".join(f"{v['test_f1']:.3f} (round {v['round']} of {v['rounds']})"
                               for v in fig["seeds"].values())
        sd = f" ± {fig['sd']:.3f}" if fig["sd"] is not None else ""
        mean = f"{fig['mean']:.3f}{sd}" if fig["mean"] is not None else "no round finished"
        print(f"{job}: test F1 at best dev {mean}; {seeds_text}")
    print(f"{len(procs)} processes in {report['seconds']} s; exit codes {codes}")
    return 0 if not any(codes) else 1


if __name__ == "__main__":
    sys.exit(main())
