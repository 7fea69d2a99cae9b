"""Document graphs and the structural-entropy non-IID split (FedLCC, Sections 3.5 and 4.2).

FedLCC splits a document-level RE training set over C clients by how
"complex" each document is: it builds one graph per document, after the
edge-oriented graph (EoG) of Christopoulou et al. (2019), takes the graph's
structural entropy (Eq. 15), cuts the range [min, max] of the entropies into
C equal-width intervals and gives each client the documents of one interval
(Section 4.2, "Experimental settings", Figure 2). Client sizes differ by
design: that imbalance is part of the non-IID scenario.

* :func:`document_graph` -- the EoG adjacency of a :class:`~tffre.data.document_schema.Document`
  (node order: :func:`graph_nodes`).
* :func:`degree_entropy` -- Eq. 15 over the degree distribution, or the
  authors' code's variant (``form="authors"``).
* :func:`entropy_interval_split` / :func:`structural_entropy_split` -- the
  equal-width interval split, on given entropies or on documents; both
  return an :class:`EntropySplit`.
* :func:`iid_split` -- the paper's IID scenario (a thin name over
  :func:`tffre.data.partition.iid_split`).
* :func:`describe_split` / :func:`plot_split` -- a table and a Figure 2-style chart.

Where this differs from the authors' released code (github.com/xxxxyan/FedLCC,
``non_iid/dataset.py`` and ``non_iid/non_iid_entropy.py``):

* Their entity-entity edges join every candidate pair in the EoG ``.data``
  file (negative "NR" pairs too) and are set in one direction only, so their
  adjacency is not symmetric. Here an entity-entity edge is an annotated
  relation (``Document.relations``) and the graph is undirected.
* Their node order is entities, mentions, sentences; ours is mentions,
  entities, sentences. The degree entropy does not depend on node order.
* Their entropy is ``form="authors"`` (see :func:`degree_entropy`), and their
  interval edges were rounded by hand (CDR: 6, 8, ..., 22 over [4.32, 24.29])
  with right-closed intervals. Here the edges are exact and left-closed; the
  two only disagree on a value that falls exactly on an interior edge.
"""

import dataclasses
from typing import Optional

import numpy as np
import pandas as pd

from tffre.data import partition

FORMS = ("paper", "authors")

# Node kinds, in the order their nodes appear in the adjacency matrix.
MENTION, ENTITY, SENTENCE = "mention", "entity", "sentence"


def graph_nodes(document):
    """The nodes of :func:`document_graph`, in row order: ``[(kind, key), ...]``.

    Mentions first (``("mention", i)``, i = index into ``document.mentions``),
    then entities (``("entity", id)``, in :meth:`Document.entities` order, i.e.
    first-mention order; ``-1`` ids are not entities), then sentences
    (``("sentence", s)``, s = index into ``document.sentences``).
    """
    return ([(MENTION, i) for i in range(len(document.mentions))]
            + [(ENTITY, eid) for eid in document.entities()]
            + [(SENTENCE, s) for s in range(len(document.sentences))])


def document_graph(document):
    """The undirected edge-oriented graph (EoG) of a document, as a 0/1 adjacency matrix.

    Nodes (rows and columns, in this order; see :func:`graph_nodes`): one per
    mention, one per entity of :meth:`Document.entities`, one per sentence.
    Edges (Christopoulou et al., 2019, as FedLCC Section 3.5 builds them):

    * mention-mention: the two mentions are in the same sentence;
    * mention-entity: the mention refers to the entity. A composite mention
      (ids ``("D1", "D2")``) links to each of its entities; an unnormalised
      mention (id ``"-1"``) has no entity and so no such edge;
    * mention-sentence: the mention's sentence;
    * entity-sentence: some mention of the entity is in that sentence;
    * sentence-sentence: adjacent sentences (s, s + 1);
    * entity-entity: an annotated relation in ``document.relations``, either
      direction. Relations naming an id that is not among the entities, or
      an entity and itself, add nothing.

    Args:
      document: a :class:`tffre.data.document_schema.Document`. Every mention's
        ``sentence`` must index ``document.sentences``.

    Returns:
      A symmetric ``(N, N)`` int8 array of 0 and 1 with a zero diagonal, N =
      mentions + entities + sentences.

    Raises:
      ValueError: if a mention has no valid sentence index (e.g. the default
        -1): mention-mention and mention-sentence edges would be guesses.
    """
    mentions, entities = document.mentions, document.entities()
    num_m, num_e, num_s = len(mentions), len(entities), len(document.sentences)
    for i, m in enumerate(mentions):
        if not 0 <= m.sentence < num_s:
            raise ValueError(f"document {document.pmid!r}: mention {i} ({m.text!r}) has sentence "
                             f"{m.sentence}, not an index into its {num_s} sentence(s)")
    first_e, first_s = num_m, num_m + num_e
    n = first_s + num_s
    adj = np.zeros((n, n), dtype=np.int8)

    def link(a, b):
        adj[a, b] = adj[b, a] = 1

    sent = np.array([m.sentence for m in mentions], dtype=np.int64)
    adj[:num_m, :num_m] = sent[:, None] == sent[None, :]  # MM: same sentence
    for i, s in enumerate(sent):
        link(i, first_s + s)  # MS
    index = {eid: first_e + k for k, eid in enumerate(entities)}
    for eid, members in entities.items():
        for i in members:
            link(i, index[eid])  # ME
            link(index[eid], first_s + sent[i])  # ES: at least one mention in the sentence
    for s in range(num_s - 1):
        link(first_s + s, first_s + s + 1)  # SS: neighbours in reading order
    for rel in document.relations:
        if rel.id1 in index and rel.id2 in index:
            link(index[rel.id1], index[rel.id2])  # EE
    # No self loops: a mention is "in the same sentence" as itself, and a relation
    # of an entity with itself would otherwise add one.
    np.fill_diagonal(adj, 0)
    return adj


def _check_adjacency(adjacency):
    a = np.asarray(adjacency)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"adjacency must be a square 2-D matrix, got shape {a.shape}")
    if a.dtype == bool:
        a = a.astype(np.int64)
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise ValueError(f"adjacency must be numeric or bool, got dtype {a.dtype}")
    # Degrees must be counts of neighbours: weights or self loops would make
    # "degree" ambiguous (a self loop counts once in a row sum, twice in networkx).
    if not np.isin(a, (0, 1)).all():
        bad = np.unique(a[~np.isin(a, (0, 1))])[:5]
        raise ValueError(f"adjacency must hold only 0 and 1 (an unweighted graph); found {bad}")
    if not np.array_equal(a, a.T):
        rows, cols = np.nonzero(a != a.T)
        raise ValueError(f"adjacency must be symmetric (an undirected graph); "
                         f"a[{rows[0]}, {cols[0]}] != a[{cols[0]}, {rows[0]}]")
    if np.diagonal(a).any():
        raise ValueError(f"adjacency has self loops (nonzero diagonal at "
                         f"{np.flatnonzero(np.diagonal(a))[:5].tolist()}); remove them")
    return a


def degree_entropy(adjacency, form="paper"):
    """The structural entropy of a graph from its degrees (FedLCC Eq. 15).

    ``form="paper"`` (default), Eq. 15 as written: ``H = -sum_d p(d) log p(d)``
    where d runs over the distinct degree values and p(d) is the fraction of
    nodes with degree d (isolated nodes form the value d = 0). The paper
    writes "log" and states no base; this uses the natural log. The base only
    scales every H by the same constant, so it does not change the
    equal-width split of :func:`entropy_interval_split` (nor any ordering).
    H is 0 for a regular graph (e.g. a complete graph) and at most log of the
    number of distinct degrees.

    ``form="authors"``, what the authors' code computes
    (``non_iid_entropy.calculate_structure_entropy``):
    ``H = -sum_v (deg(v) / N) log2(deg(v) / N)`` over the N nodes v, with
    log base 2. The terms deg(v)/N sum to the mean degree, not to 1, so this
    is not the entropy of a distribution; it grows with the graph's size
    (the authors report 4.3 to 24.3 on CDR). A node of degree 0 contributes
    0 here (0 log 0 = 0); the authors' numpy code would give NaN.

    Args:
      adjacency: a square, symmetric 0/1 matrix (bool or numeric) with a zero
        diagonal, e.g. from :func:`document_graph`.
      form: ``"paper"`` or ``"authors"``.

    Returns:
      H as a Python float; 0.0 for a graph with no nodes.

    Raises:
      ValueError: for an unknown ``form``, or an adjacency that is not square,
        not 0/1, not symmetric or has self loops.
    """
    if form not in FORMS:
        raise ValueError(f"unknown entropy form {form!r}; valid: {', '.join(FORMS)}")
    a = _check_adjacency(adjacency)
    n = a.shape[0]
    if n == 0:
        return 0.0
    degrees = a.sum(axis=1)
    if form == "paper":
        _, counts = np.unique(degrees, return_counts=True)
        p = counts / n  # p_i of Eq. 15: the share of nodes with the i-th degree value
        # "+ 0.0" turns the -0.0 of a regular graph into 0.0.
        return float(-np.sum(p * np.log(p))) + 0.0
    q = degrees[degrees > 0] / n
    return float(-np.sum(q * np.log2(q))) + 0.0


@dataclasses.dataclass(frozen=True, eq=False)
class EntropySplit:
    """The result of :func:`entropy_interval_split` / :func:`structural_entropy_split`.

    Attributes:
      entropies: float64 ``(num_documents,)``, the structural entropy of each document.
      edges: float64 ``(num_clients + 1,)``, the interval edges, ``edges[0]`` the
        smallest and ``edges[-1]`` the largest entropy. Client k holds
        ``[edges[k], edges[k + 1])``; the last client's interval is closed,
        ``[edges[-2], edges[-1]]``.
      clients: int64 ``(num_documents,)``, the client of each document.
      form: the :func:`degree_entropy` form used, or None if the entropies were
        given.
    """

    entropies: np.ndarray
    edges: np.ndarray
    clients: np.ndarray
    form: Optional[str] = None

    @property
    def num_clients(self):
        """C, the number of intervals (and clients)."""
        return len(self.edges) - 1

    @property
    def sizes(self):
        """int64 ``(num_clients,)``: documents per client (0 for an empty client)."""
        return np.bincount(self.clients, minlength=self.num_clients).astype(np.int64)

    @property
    def empty_clients(self):
        """The clients whose interval holds no document, as a tuple of ints."""
        return tuple(int(k) for k in np.flatnonzero(self.sizes == 0))

    def parts(self):
        """One sorted int64 array of document indices per client, like
        :func:`tffre.data.partition.iid_split` returns (empty arrays for empty clients)."""
        return [np.flatnonzero(self.clients == k).astype(np.int64)
                for k in range(self.num_clients)]

    def assign(self, entropies, clients=None):
        """Each of ``entropies``' client by these intervals (a held-out document's, so that a
        client is scored on documents like its own): the interval holding it, a value below
        the smallest edge or above the largest in the first or last interval. With
        ``clients`` (the clients kept, say those with training documents), a value whose
        interval's client is not among them goes to the nearest kept one by interval index
        (the lower on a tie).

        Returns:
          int64 ``(len(entropies),)``: a client index (of all, or of ``clients``' order with
          ``clients``).
        """
        values = np.asarray(entropies, dtype=np.float64).reshape(-1)
        out = np.clip(np.searchsorted(self.edges, values, side="right") - 1, 0,
                      self.num_clients - 1)
        if clients is None:
            return out.astype(np.int64)
        kept = np.asarray(clients, dtype=np.int64)
        if kept.size == 0:
            raise ValueError("assign: no client kept")
        # argmin picks the first of equal distances, the lower interval as kept is sorted.
        order = np.argsort(kept, kind="stable")
        nearest = np.argmin(np.abs(out[:, None] - kept[order][None, :]), axis=1)
        return order[nearest].astype(np.int64)

    def interval(self, client, digits=4):
        """Client ``client``'s interval as text, e.g. ``"[1.0000, 2.0000)"``."""
        lo, hi = self.edges[client], self.edges[client + 1]
        close = "]" if client == self.num_clients - 1 else ")"
        return f"[{lo:.{digits}f}, {hi:.{digits}f}{close}"


def _check_num_clients(num_clients):
    if isinstance(num_clients, bool) or int(num_clients) != num_clients or num_clients < 1:
        raise ValueError(f"num_clients must be an int >= 1, got {num_clients!r}")
    return int(num_clients)


def entropy_interval_split(entropies, num_clients, allow_empty=True, form=None):
    """Splits documents over clients by equal-width intervals of their entropy (FedLCC Sec. 4.2).

    The range [min, max] of ``entropies`` is cut into ``num_clients``
    equal-width intervals, ``edges = np.linspace(min, max, C + 1)``; client k
    gets the documents with ``edges[k] <= H < edges[k + 1]``, and the last
    client also those with ``H == max``. So a value on an interior edge goes
    to the upper interval, the minimum to client 0 and the maximum to client
    C - 1. The rule has no randomness: the same entropies always give the
    same split, and every document is in exactly one client.

    Client sizes follow the entropy histogram and may differ a lot (the
    paper's non-IID imbalance). An interval with no document leaves its
    client empty: by default the client is kept (its index still counts,
    ``EntropySplit.empty_clients`` names it and :func:`describe_split` marks
    it) so that client k always means interval k; a federated run must then
    skip or drop that client. Pass ``allow_empty=False`` to get an error
    instead.

    Args:
      entropies: one finite number per document.
      num_clients: C >= 1.
      allow_empty: whether a client may get no document (see above).
      form: recorded in the result (:func:`structural_entropy_split` passes its form).

    Returns:
      An :class:`EntropySplit`.

    Raises:
      ValueError: for no documents, a non-finite entropy, a bad ``num_clients``,
        all entropies equal while C > 1 (there is no interval to divide), or
        an empty client when ``allow_empty`` is False.
    """
    num_clients = _check_num_clients(num_clients)
    values = np.asarray(entropies, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"entropies must be a non-empty 1-D sequence, got shape {values.shape}")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(f"entropies must be finite; documents {bad[:5].tolist()} are "
                         f"{values[bad[:5]].tolist()}")
    lo, hi = float(values.min()), float(values.max())
    if lo == hi and num_clients > 1:
        raise ValueError(f"all {values.size} documents have entropy {lo}: the interval "
                         f"[{lo}, {hi}] has zero width and cannot be divided into "
                         f"{num_clients} parts; use iid_split or num_clients=1")
    edges = np.linspace(lo, hi, num_clients + 1)
    edges[0], edges[-1] = lo, hi  # exact ends, so min and max land in the first/last client
    # searchsorted(side="right") - 1 is the k with edges[k] <= H < edges[k+1];
    # H == max gives C, which the clip folds into the last (closed) interval.
    clients = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, num_clients - 1)
    result = EntropySplit(values, edges, clients.astype(np.int64), form)
    if not allow_empty and result.empty_clients:
        raise ValueError(f"clients {list(result.empty_clients)} get no document (documents per "
                         f"client: {result.sizes.tolist()}); lower num_clients or pass "
                         "allow_empty=True")
    return result


def structural_entropy_split(documents, num_clients, form="paper", allow_empty=True):
    """FedLCC's non-IID split: each document's EoG degree entropy, then equal-width intervals.

    For each document, ``degree_entropy(document_graph(document), form)``
    (Eq. 15); then :func:`entropy_interval_split` over those entropies (see
    there for the interval rule, empty clients and errors). Deterministic.

    Args:
      documents: :class:`tffre.data.document_schema.Document` objects, e.g. a loader's training set.
      num_clients: C (the paper uses 10).
      form: ``"paper"`` or ``"authors"``, as in :func:`degree_entropy`.
      allow_empty: as in :func:`entropy_interval_split`.

    Returns:
      An :class:`EntropySplit`; ``clients[i]`` is document i's client.
    """
    if form not in FORMS:
        raise ValueError(f"unknown entropy form {form!r}; valid: {', '.join(FORMS)}")
    entropies = [degree_entropy(document_graph(doc), form) for doc in documents]
    return entropy_interval_split(entropies, num_clients, allow_empty=allow_empty, form=form)


def iid_split(num_documents, num_clients, seed):
    """The paper's IID scenario: the documents shuffled with a seed and divided evenly into C parts.

    This is :func:`tffre.data.partition.iid_split` (``RandomState(seed)
    .permutation(N)`` dealt round-robin, so sizes differ by at most one),
    which already implements "randomly shuffled and evenly divided into C
    portions" (FedLCC Sec. 4.2); dealing round-robin or cutting the
    permutation into contiguous blocks gives the same distribution of splits.

    Returns:
      ``num_clients`` sorted int64 arrays of document indices, partitioning
      ``range(num_documents)``.

    Raises:
      ValueError: if ``num_clients`` is not an int >= 1 or exceeds ``num_documents``.
    """
    return partition.iid_split(num_documents, num_clients, seed)


def describe_split(result, digits=4):
    """A printable table of an :class:`EntropySplit`: client, documents, entropy interval.

    One row per client (an empty client reads 0 documents and is marked
    "(empty)"), then an "all" row with the total and [min, max].
    """
    rows = [{"client": k, "documents": int(size), "entropy interval": result.interval(k, digits),
             "note": "(empty)" if size == 0 else ""}
            for k, size in enumerate(result.sizes)]
    rows.append({"client": "all", "documents": int(result.sizes.sum()),
                 "entropy interval": f"[{result.edges[0]:.{digits}f}, "
                                     f"{result.edges[-1]:.{digits}f}]", "note": ""})
    table = pd.DataFrame(rows)
    if not result.empty_clients:
        table = table.drop(columns="note")
    header = (f"structural-entropy split ({result.form or 'given'} entropies, "
              f"{result.num_clients} clients)")
    return header + "\n" + table.to_string(index=False)


def plot_split(result, path, title=None, digits=2):
    """Writes a PNG of documents per client with each client's entropy interval (like
    FedLCC Figure 2); returns the Figure.

    One bar per client, its document count above it and its interval under
    the client index on the x axis (empty clients show a zero-height bar).
    Like :mod:`tffre.plots`, this builds its own Figure on the Agg canvas and
    never imports ``matplotlib.pyplot`` or changes the backend.

    Args:
      result: an :class:`EntropySplit`.
      path: the PNG path.
      title: optional figure title.
      digits: decimals of the interval labels.

    Returns:
      The ``matplotlib.figure.Figure``; its single axes holds one bar per client.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    num_clients = result.num_clients
    # About an inch per client keeps the two-line interval labels upright and apart.
    width = min(24.0, max(6.0, 1.1 * num_clients + 1.5))
    fig = Figure(figsize=(width, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    x = np.arange(num_clients)
    bars = ax.bar(x, result.sizes, color="tab:blue")
    ax.bar_label(bars, fontsize=8)
    ax.set_xticks(x, [f"{k}\n{result.interval(k, digits)}" for k in range(num_clients)],
                  fontsize=7, rotation=90 if num_clients > 20 else 0)
    ax.set(xlabel="client (entropy interval)", ylabel="documents",
           title="documents per client")
    ax.margins(y=0.12)  # room for the counts above the tallest bar
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig
