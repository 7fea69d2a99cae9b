"""``tffre.data.deal``: each site's copy reads with the dataset's own loader, and the sites'
records together are the source's, each once."""

import collections
import os

from tffre import resources
from tffre.data.deal import deal

SITES = ("a", "b", "c")


def test_sentence_set_lines_are_dealt_and_each_copy_loads(tmp_path):
    from tffre.data.sentence_sets import load_re
    source = resources.path("re_sample", "gad")
    out = deal(source, tmp_path, SITES)
    whole, _ = load_re("gad", source)
    parts = [load_re("gad", out[s])[0] for s in SITES]
    assert sum(len(p) for p in parts) == len(whole)
    key = ["split", "text", "label"]
    assert collections.Counter(map(tuple, whole[key].astype(str).values.tolist())) == \
        collections.Counter(t for p in parts for t in map(tuple, p[key].astype(str).values.tolist()))
    # Round-robin: the site sizes differ by at most one per split file.
    for split in ("train", "dev", "test"):
        sizes = [int((p["split"] == split).sum()) for p in parts]
        assert max(sizes) - min(sizes) <= 1


def test_imcs_dialogues_are_dealt_and_the_public_vectors_copied(tmp_path):
    from tffre.data.imcs_dialogues import load_imcs
    source = resources.path("imcs_sample")
    out = deal(source, tmp_path, SITES)
    whole = load_imcs(source, verbose=False)
    parts = [load_imcs(out[s], verbose=False) for s in SITES]
    for split, dialogues in whole.items():
        ids = sorted(d.example_id for p in parts for d in p.get(split, []))
        assert ids == sorted(d.example_id for d in dialogues)
    for s in SITES:
        with open(os.path.join(out[s], "w2v_sample.txt"), "rb") as f, \
                open(os.path.join(source, "w2v_sample.txt"), "rb") as g:
            assert f.read() == g.read()


def test_pubtator_documents_are_dealt(tmp_path):
    from tffre.data.document_sets import load_document_splits
    source = resources.path("docre_sample")
    out = deal(source, tmp_path, SITES)
    whole = load_document_splits(source, seed=0)
    parts = [load_document_splits(out[s], seed=0) for s in SITES]
    for split in ("train", "dev", "test"):
        ids = sorted(d.pmid for p in parts for d in p[split])
        assert ids == sorted(d.pmid for d in whole[split])


def test_images_are_dealt_within_their_class_folders(tmp_path):
    source = resources.path("image_sample")
    out = deal(source, tmp_path, SITES)

    def files(root):
        return sorted(os.path.relpath(os.path.join(r, f), root) for r, _, fs in os.walk(root)
                      for f in fs if f.endswith(".png"))
    dealt = [files(out[s]) for s in SITES]
    assert sorted(f for d in dealt for f in d) == files(source)
    # Every site holds every class of the training folder.
    for d in dealt:
        assert {f.split(os.sep)[1] for f in d if f.startswith("train")} == \
            set(os.listdir(os.path.join(source, "train")))


def test_a_single_file_is_dealt_into_files_of_its_name(tmp_path):
    source = resources.path("re_sample", "gad", "train.tsv")
    out = deal(source, tmp_path, ("a", "b"))
    assert [os.path.basename(p) for p in out.values()] == ["train.tsv", "train.tsv"]
    with open(source, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    dealt = []
    for path in out.values():
        with open(path, encoding="utf-8") as f:
            dealt += f.read().splitlines()
    assert sorted(dealt) == sorted(lines)
