"""tffre.data.doc_graph: the EoG document graph, Eq. 15 entropy and the FedLCC splits.

Every expected number here is worked out by hand (in comments) from the
graph or the entropies, not taken from the code under test.
"""

import math
import sys

import numpy as np
import pytest

from tffre.data import partition
from tffre.data.doc_graph import (EntropySplit, degree_entropy, describe_split, document_graph,
                                  entropy_interval_split, graph_nodes, iid_split, plot_split,
                                  structural_entropy_split)
from tffre.data.document_schema import Document, Mention, Relation


def plogp(*ps, log=math.log):
    """-sum p log p, written out for the hand computations."""
    return -sum(p * log(p) for p in ps)


PATH3 = [[0, 1, 0],
         [1, 0, 1],
         [0, 1, 0]]
STAR4 = [[0, 1, 1, 1],  # centre 0, leaves 1-3
         [1, 0, 0, 0],
         [1, 0, 0, 0],
         [1, 0, 0, 0]]
K4 = [[0, 1, 1, 1],
      [1, 0, 1, 1],
      [1, 1, 0, 1],
      [1, 1, 1, 0]]
EDGE_AND_ISOLATED = [[0, 1, 0],
                     [1, 0, 0],
                     [0, 0, 0]]


# --- degree_entropy ---------------------------------------------------------------------------

@pytest.mark.parametrize("adjacency,paper,authors", [
    # degrees [1, 2, 1]: p(1) = 2/3, p(2) = 1/3; authors: deg/N = 1/3, 2/3, 1/3.
    (PATH3, plogp(2 / 3, 1 / 3), plogp(1 / 3, 2 / 3, 1 / 3, log=math.log2)),
    # degrees [3, 1, 1, 1]: p(1) = 3/4, p(3) = 1/4; authors: 3/4, 1/4, 1/4, 1/4.
    (STAR4, plogp(3 / 4, 1 / 4), plogp(3 / 4, 1 / 4, 1 / 4, 1 / 4, log=math.log2)),
    # K4 is 3-regular: p(3) = 1 gives 0; authors: four terms 3/4 (they sum to 3, not 1).
    (K4, 0.0, -4 * 0.75 * math.log2(0.75)),
    # degrees [1, 1, 0]: degree 0 is a value, p(0) = 1/3; authors: the isolated node adds 0.
    (EDGE_AND_ISOLATED, plogp(2 / 3, 1 / 3), plogp(1 / 3, 1 / 3, log=math.log2)),
])
def test_degree_entropy_on_hand_graphs(adjacency, paper, authors):
    assert degree_entropy(adjacency) == pytest.approx(paper, abs=1e-12)
    assert degree_entropy(adjacency, form="paper") == pytest.approx(paper, abs=1e-12)
    assert degree_entropy(adjacency, form="authors") == pytest.approx(authors, abs=1e-12)


def test_degree_entropy_hand_values_are_what_the_comments_say():
    # Guards the helper: ln 3 - (2/3) ln 2 for the path, log2 form of K4 = 3 log2(4/3).
    assert plogp(2 / 3, 1 / 3) == pytest.approx(math.log(3) - 2 / 3 * math.log(2))
    assert -4 * 0.75 * math.log2(0.75) == pytest.approx(3 * math.log2(4 / 3))


def test_regular_graph_is_exactly_zero_not_minus_zero():
    h = degree_entropy(K4)
    assert h == 0.0 and math.copysign(1.0, h) == 1.0
    assert isinstance(h, float)


def test_degree_entropy_accepts_bool_and_float_and_ignores_node_order():
    a = np.array(STAR4)
    expected = plogp(3 / 4, 1 / 4)
    assert degree_entropy(a.astype(bool)) == pytest.approx(expected)
    assert degree_entropy(a.astype(np.float32)) == pytest.approx(expected)
    perm = [2, 0, 3, 1]
    assert degree_entropy(a[np.ix_(perm, perm)]) == pytest.approx(expected)


def test_empty_graph_has_zero_entropy():
    assert degree_entropy(np.zeros((0, 0))) == 0.0
    assert degree_entropy(np.zeros((0, 0)), form="authors") == 0.0


@pytest.mark.parametrize("adjacency,message", [
    (np.zeros((2, 3)), "square"),
    (np.zeros(4), "square"),
    ([[0, 1], [0, 0]], "symmetric"),
    ([[0, 2], [2, 0]], "only 0 and 1"),
    ([[1, 1], [1, 0]], "self loops"),
    ([["a", "b"], ["b", "a"]], "numeric"),
])
def test_degree_entropy_rejects_bad_matrices(adjacency, message):
    with pytest.raises(ValueError, match=message):
        degree_entropy(adjacency)


def test_degree_entropy_rejects_unknown_form():
    with pytest.raises(ValueError, match="unknown entropy form 'log2'"):
        degree_entropy(PATH3, form="log2")


# --- document_graph ---------------------------------------------------------------------------

S0 = "Aspirin causes headache."
S1 = "Aspirin and NSAIDs cause nausea and vomiting."
TEXT = S0 + " " + S1
OFF = len(S0) + 1


def mention(text, ids, sentence, start):
    return Mention(start, start + len(text), text, "Chemical", tuple(ids), sentence)


def hand_document(relations=None):
    """Two sentences; a composite "D2|D3" mention and an unnormalised "-1" mention."""
    mentions = [
        mention("Aspirin", ["C1"], 0, 0),                                 # m0
        mention("headache", ["D1"], 0, S0.index("headache")),             # m1
        mention("Aspirin", ["C1"], 1, OFF),                               # m2
        mention("NSAIDs", ["-1"], 1, OFF + S1.index("NSAIDs")),           # m3
        mention("nausea and vomiting", ["D2", "D3"], 1, OFF + S1.index("nausea")),  # m4
    ]
    if relations is None:
        # The second names an entity the document does not have: no edge.
        relations = [Relation("CID", "C1", "D1"), Relation("CID", "C1", "X9")]
    return Document("123", TEXT, mentions, relations, [(0, len(S0)), (OFF, len(TEXT))])


# Nodes 0-4: m0..m4; 5: C1, 6: D1, 7: D2, 8: D3 (first-mention order); 9: S0, 10: S1.
# MM: 0-1 (S0), 2-3, 2-4, 3-4 (S1).   ME: 0-5, 2-5, 1-6, 4-7, 4-8 (m3 has none).
# MS: 0-9, 1-9, 2-10, 3-10, 4-10.    ES: 5-9, 5-10, 6-9, 7-10, 8-10.   SS: 9-10.   EE: 5-6.
EXPECTED = np.array([
    #0  1  2  3  4  5  6  7  8  9 10
    [0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0],  # 0  m0 Aspirin (S0)
    [1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0],  # 1  m1 headache (S0)
    [0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1],  # 2  m2 Aspirin (S1)
    [0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1],  # 3  m3 NSAIDs, id -1 (S1)
    [0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 1],  # 4  m4 nausea and vomiting, D2|D3 (S1)
    [1, 0, 1, 0, 0, 0, 1, 0, 0, 1, 1],  # 5  C1
    [0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0],  # 6  D1
    [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1],  # 7  D2
    [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1],  # 8  D3
    [1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1],  # 9  S0
    [0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 0],  # 10 S1
])
# Row sums: [3, 3, 4, 3, 5, 5, 3, 2, 2, 5, 7]: degree 2 twice, 3 four times, 4 once,
# 5 three times, 7 once (N = 11, 21 edges).
HAND_DOC_PAPER_H = plogp(2 / 11, 4 / 11, 1 / 11, 3 / 11, 1 / 11)
HAND_DOC_AUTHORS_H = plogp(*(d / 11 for d in [3, 3, 4, 3, 5, 5, 3, 2, 2, 5, 7]), log=math.log2)


def test_hand_document_is_consistent():
    doc = hand_document()
    for m in doc.mentions:
        assert doc.text[m.start:m.end] == m.text
        start, end = doc.sentences[m.sentence]
        assert start <= m.start and m.end <= end


def test_document_graph_matches_the_hand_adjacency():
    adj = document_graph(hand_document())
    assert adj.dtype == np.int8
    np.testing.assert_array_equal(adj, EXPECTED)
    assert EXPECTED.sum() == 2 * 21 and (EXPECTED == EXPECTED.T).all()


def test_graph_nodes_order():
    assert graph_nodes(hand_document()) == [
        ("mention", 0), ("mention", 1), ("mention", 2), ("mention", 3), ("mention", 4),
        ("entity", "C1"), ("entity", "D1"), ("entity", "D2"), ("entity", "D3"),
        ("sentence", 0), ("sentence", 1)]


def test_relations_only_add_entity_entity_edges():
    no_rel = document_graph(hand_document(relations=[]))
    expected = EXPECTED.copy()
    expected[5, 6] = expected[6, 5] = 0
    np.testing.assert_array_equal(no_rel, expected)
    # Either direction gives the same edge; a relation of an entity with itself adds no loop.
    reverse = document_graph(hand_document(relations=[Relation("CID", "D1", "C1"),
                                                      Relation("CID", "D2", "D2")]))
    np.testing.assert_array_equal(reverse, EXPECTED)


def test_entropy_of_the_hand_document():
    adj = document_graph(hand_document())
    assert degree_entropy(adj) == pytest.approx(HAND_DOC_PAPER_H, abs=1e-12)
    assert degree_entropy(adj, form="authors") == pytest.approx(HAND_DOC_AUTHORS_H, abs=1e-12)


def test_mention_without_a_sentence_is_an_error():
    doc = hand_document()
    doc.mentions[3] = Mention(0, 7, "Aspirin", "Chemical", ("C1",))  # sentence defaults to -1
    with pytest.raises(ValueError, match=r"mention 3 .* sentence -1"):
        document_graph(doc)


def test_single_sentence_without_mentions_is_one_isolated_node():
    doc = Document("1", "Nothing here.", [], [], [(0, 13)])
    np.testing.assert_array_equal(document_graph(doc), [[0]])
    assert degree_entropy(document_graph(doc)) == 0.0  # p(0) = 1


# --- the equal-width interval split ------------------------------------------------------------

def test_interval_split_on_hand_entropies():
    # [1, 5] in 4 parts: edges 1, 2, 3, 4, 5. An interior edge goes up (3.0 -> client 2),
    # the min to client 0 and the max (5.0) to the last client.
    split = entropy_interval_split([1.0, 3.0, 2.0, 5.0, 1.5, 4.9], 4)
    assert isinstance(split, EntropySplit)
    np.testing.assert_array_equal(split.edges, [1.0, 2.0, 3.0, 4.0, 5.0])
    assert split.clients.tolist() == [0, 2, 1, 3, 0, 3]
    assert split.clients.dtype == np.int64
    assert split.sizes.tolist() == [2, 1, 1, 2]
    assert split.num_clients == 4 and split.empty_clients == ()
    assert [p.tolist() for p in split.parts()] == [[0, 4], [2], [1], [3, 5]]


def test_interval_split_uneven_edges():
    # [0, 0.9] in 3 parts: edges 0, 0.3, 0.6, 0.9.
    split = entropy_interval_split([0.9, 0.0, 0.29, 0.31, 0.61, 0.59, 0.9], 3)
    np.testing.assert_allclose(split.edges, [0.0, 0.3, 0.6, 0.9])
    assert split.edges[0] == 0.0 and split.edges[-1] == 0.9
    assert split.clients.tolist() == [2, 0, 0, 1, 2, 1, 2]


def test_empty_clients_are_kept_and_reported_or_refused():
    # [0, 1] in 4 parts: edges 0, .25, .5, .75, 1; nothing in [.25, .5) or [.5, .75).
    split = entropy_interval_split([0.0, 0.1, 1.0], 4)
    assert split.clients.tolist() == [0, 0, 3]
    assert split.sizes.tolist() == [2, 0, 0, 1]
    assert split.empty_clients == (1, 2)
    assert [p.tolist() for p in split.parts()] == [[0, 1], [], [], [2]]
    with pytest.raises(ValueError, match=r"clients \[1, 2\] get no document"):
        entropy_interval_split([0.0, 0.1, 1.0], 4, allow_empty=False)


def test_held_out_documents_go_to_the_interval_that_holds_them():
    """EntropySplit.assign: the training edges place held-out entropies (outside values in
    the end intervals); with the kept clients, a dropped client's documents go to the nearest
    kept one, the lower on a tie."""
    split = entropy_interval_split([1.0, 3.0, 2.0, 5.0, 1.5, 4.9], 4)   # edges 1, 2, 3, 4, 5
    held = [0.2, 1.0, 2.5, 3.0, 4.99, 5.0, 7.0]
    assert split.assign(held).tolist() == [0, 0, 1, 2, 3, 3, 3]
    # [0, 1] in 4 parts, clients 1 and 2 empty and dropped: kept [0, 3] in that order.
    sparse = entropy_interval_split([0.0, 0.1, 1.0], 4)
    values = [0.05, 0.3, 0.6, 0.9]        # intervals 0, 1, 2, 3
    # Interval 1 is nearer client 0 (1 away) than 3 (2 away); 2 is nearer 3.
    assert sparse.assign(values, clients=[0, 3]).tolist() == [0, 0, 1, 1]
    # A tie (interval 1 between kept 0 and 2) goes to the lower; kept given out of order.
    three = entropy_interval_split([0.0, 0.4, 0.6, 1.0], 4)   # edges 0, .25, .5, .75, 1
    assert three.assign([0.3], clients=[2, 0]).tolist() == [1]   # index of client 0
    assert split.assign([]).tolist() == []
    with pytest.raises(ValueError, match="no client kept"):
        split.assign([1.0], clients=[])


def test_split_is_deterministic_and_covers_every_document_once():
    values = np.random.RandomState(0).uniform(2.0, 9.0, 200)
    a = entropy_interval_split(values, 10)
    b = entropy_interval_split(values.copy(), 10)
    np.testing.assert_array_equal(a.clients, b.clients)
    np.testing.assert_array_equal(a.edges, b.edges)
    everyone = np.sort(np.concatenate(a.parts()))
    np.testing.assert_array_equal(everyone, np.arange(200))
    # The split of a permuted input is the permuted split (each document alone decides).
    perm = np.random.RandomState(1).permutation(200)
    np.testing.assert_array_equal(entropy_interval_split(values[perm], 10).clients,
                                  a.clients[perm])
    # Each value lies in its client's interval, the last one closed.
    lo, hi = values.min(), values.max()
    width = (hi - lo) / 10
    for v, k in zip(values, a.clients):
        assert lo + k * width - 1e-9 <= v
        assert v < lo + (k + 1) * width or (k == 9 and v == hi)


def test_log_base_does_not_change_the_split():
    nats = np.array([0.3, 1.1, 0.7, 2.0, 1.6, 0.95])
    bits = nats / math.log(2)
    np.testing.assert_array_equal(entropy_interval_split(nats, 3).clients,
                                  entropy_interval_split(bits, 3).clients)


def test_equal_entropies():
    one = entropy_interval_split([1.5, 1.5], 1)
    assert one.clients.tolist() == [0, 0]
    np.testing.assert_array_equal(one.edges, [1.5, 1.5])
    with pytest.raises(ValueError, match="zero width"):
        entropy_interval_split([1.5, 1.5], 2)


@pytest.mark.parametrize("entropies,num_clients,message", [
    ([], 2, "non-empty"),
    ([[1.0, 2.0]], 2, "1-D"),
    ([1.0, float("nan")], 2, r"finite; documents \[1\]"),
    ([1.0, 2.0], 0, "num_clients"),
    ([1.0, 2.0], True, "num_clients"),
    ([1.0, 2.0], 2.5, "num_clients"),
])
def test_interval_split_rejects_bad_input(entropies, num_clients, message):
    with pytest.raises(ValueError, match=message):
        entropy_interval_split(entropies, num_clients)


# --- structural_entropy_split on documents ------------------------------------------------------

def small_documents():
    one = Document("1", "A b.", [mention("A", ["E1"], 0, 0)], [], [(0, 4)])
    # nodes m0, E1, S0, a triangle: 2-regular, H = 0.
    two = hand_document()  # H = HAND_DOC_PAPER_H (about 1.47)
    three = Document("3", "A b. C d.", [mention("A", ["E1"], 0, 0), mention("C", ["E2"], 1, 5)],
                     [], [(0, 4), (5, 9)])
    # nodes m0, m1, E1, E2, S0, S1; edges m0-E1, m0-S0, E1-S0, m1-E2, m1-S1, E2-S1, S0-S1:
    # degrees [2, 2, 2, 2, 3, 3]: p(2) = 4/6, p(3) = 2/6.
    return [one, two, three]


def test_structural_entropy_split_on_documents():
    h3 = plogp(4 / 6, 2 / 6)
    split = structural_entropy_split(small_documents(), 2)
    np.testing.assert_allclose(split.entropies, [0.0, HAND_DOC_PAPER_H, h3], atol=1e-12)
    # [0, 1.47] halved at about 0.73: 0.0 and h3 (about 0.64) below, the hand document above.
    assert h3 < HAND_DOC_PAPER_H / 2
    assert split.clients.tolist() == [0, 1, 0]
    assert split.form == "paper"
    authors = structural_entropy_split(small_documents(), 2, form="authors")
    assert authors.form == "authors"
    assert authors.entropies[1] == pytest.approx(HAND_DOC_AUTHORS_H)
    with pytest.raises(ValueError, match="unknown entropy form"):
        structural_entropy_split(small_documents(), 2, form="nats")


# --- iid_split -----------------------------------------------------------------------------------

def test_iid_split_covers_evenly_and_reuses_partition():
    parts = iid_split(23, 5, seed=7)
    assert len(parts) == 5
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(23))
    assert sorted(len(p) for p in parts) == [4, 4, 5, 5, 5]  # 23 = 3 * 5 + 2 * 4
    assert all((np.diff(p) > 0).all() for p in parts)
    for mine, theirs in zip(parts, partition.iid_split(23, 5, 7)):
        np.testing.assert_array_equal(mine, theirs)
    again = iid_split(23, 5, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    other = iid_split(23, 5, seed=8)
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other))
    with pytest.raises(ValueError):
        iid_split(3, 5, seed=0)


# --- describe_split / plot_split -----------------------------------------------------------------

def test_describe_split_table():
    text = describe_split(entropy_interval_split([0.0, 0.1, 1.0], 4))
    lines = text.splitlines()
    assert "4 clients" in lines[0]
    assert lines[1].split()[:3] == ["client", "documents", "entropy"]
    assert "[0.0000, 0.2500)" in lines[2] and lines[2].split()[:2] == ["0", "2"]
    assert "(empty)" in lines[3] and "(empty)" in lines[4]
    assert "[0.7500, 1.0000]" in lines[5] and lines[5].split()[:2] == ["3", "1"]
    assert lines[6].split()[:2] == ["all", "3"] and "[0.0000, 1.0000]" in lines[6]
    assert "(empty)" not in describe_split(entropy_interval_split([1.0, 2.0], 2))


def test_plot_split_writes_a_png(tmp_path):
    split = entropy_interval_split([0.0, 0.1, 1.0, 0.8], 4)
    path = tmp_path / "split.png"
    had_pyplot = "matplotlib.pyplot" in sys.modules
    fig = plot_split(split, path, title="CDR")
    assert had_pyplot or "matplotlib.pyplot" not in sys.modules  # library-safe, like tffre.plots
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    (ax,) = fig.axes
    assert [p.get_height() for p in ax.patches] == [2, 0, 0, 2]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "0\n[0.00, 0.25)" and labels[-1] == "3\n[0.75, 1.00]"
