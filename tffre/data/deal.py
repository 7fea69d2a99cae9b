"""Deals a dataset's records over site folders, to try a deployment on one machine.

:func:`deal` copies a dataset folder (or file) once per site, each copy holding every n-th
record of each file (record i to site i mod n), in the dataset's own format, so each site
reads its copy exactly as it would read its own data:

* ``.tsv``, ``.txt`` of sentence sets: one record a line (a BLUE ``index`` header is kept
  in every copy);
* ``.json`` of IMCS: one record an entry of the top-level object (a dialogue);
* ``.pubtator``, ``.PubTator``: one record a document (blocks separated by blank lines);
* images (``.png``, ``.jpg``, ``.jpeg``): one record a file, dealt within its folder (each
  class folder over the sites);
* ``SYNTHETIC.txt`` and Word2Vec vectors (``w2v*``): public files, copied whole to every
  site.

It is a demonstration's partition (IID by record); the simulation's partitions
(label-Dirichlet, structural entropy) are in :mod:`tffre.data.partition`.
"""

import json
import os
import shutil

IMAGES = (".png", ".jpg", ".jpeg")
COPIED = ("SYNTHETIC.txt",)


def deal(source, folder, sites):
    """Writes ``folder/<site>`` for each of ``sites``: ``source``'s records dealt over them
    (see the module docstring); returns {site: its data path} (a folder, or a file when
    ``source`` is a file)."""
    out = {}
    for site in sites:
        out[site] = os.path.join(folder, site)
        os.makedirs(out[site], exist_ok=True)
    if os.path.isfile(source):
        name = os.path.basename(source)
        _deal_file(source, [os.path.join(out[s], name) for s in sites])
        return {s: os.path.join(out[s], name) for s in sites}
    for root, dirs, files in os.walk(source):
        dirs.sort()
        rel = os.path.relpath(root, source)
        targets = [os.path.normpath(os.path.join(out[s], rel)) for s in sites]
        for target in targets:
            os.makedirs(target, exist_ok=True)
        images = sorted(f for f in files if f.lower().endswith(IMAGES))
        for i, name in enumerate(images):
            shutil.copyfile(os.path.join(root, name),
                            os.path.join(targets[i % len(sites)], name))
        for name in sorted(set(files) - set(images)):
            _deal_file(os.path.join(root, name), [os.path.join(t, name) for t in targets])
    return out


def _deal_file(path, targets):
    """One file's records over ``targets`` (one path per site)."""
    name = os.path.basename(path)
    lower = name.lower()
    if name in COPIED or lower.startswith("w2v"):
        for target in targets:
            shutil.copyfile(path, target)
        return
    with open(path, encoding="utf-8") as f:
        text = f.read()
    n = len(targets)
    if lower.endswith(".json"):
        records = json.loads(text)
        if not isinstance(records, dict):
            raise ValueError(f"{path}: expected a JSON object of records (IMCS)")
        keys = list(records)
        for k, target in enumerate(targets):
            with open(target, "w", encoding="utf-8") as f:
                json.dump({key: records[key] for key in keys[k::n]}, f, ensure_ascii=False)
        return
    if lower.endswith(".pubtator"):
        blocks = [b for b in text.split("\n\n") if b.strip()]
        for k, target in enumerate(targets):
            with open(target, "w", encoding="utf-8") as f:
                f.write("\n\n".join(b.strip("\n") for b in blocks[k::n]) + "\n")
        return
    lines = text.splitlines()
    header = lines[:1] if lines and lines[0].startswith("index\t") else []
    body = [line for line in lines[len(header):] if line.strip()]
    for k, target in enumerate(targets):
        with open(target, "w", encoding="utf-8") as f:
            f.write("\n".join(header + body[k::n]) + "\n")
