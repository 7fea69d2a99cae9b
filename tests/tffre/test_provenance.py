"""tffre.provenance: what a summary records of a run's origin, against independent readings."""

import hashlib
import os
import subprocess

from tffre import provenance


def test_data_files_hash_every_file_of_a_folder_in_order(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "b.txt").write_bytes(b"bee")
    (tmp_path / "d" / "sub" / "a.txt").write_bytes(b"ay")
    (tmp_path / "d" / ".hidden").write_bytes(b"x")
    (tmp_path / "one.tsv").write_bytes(b"1\t2\n")
    files = provenance.data_files({"data": str(tmp_path / "d"), "w2v": str(tmp_path / "one.tsv")})
    assert [(f["option"], f["file"], f["bytes"]) for f in files] == [
        ("data", "b.txt", 3), ("data", os.path.join("sub", "a.txt"), 2), ("w2v", "one.tsv", 4)]
    assert files[0]["sha256"] == hashlib.sha256(b"bee").hexdigest()


def test_input_paths_keep_existing_inputs_only(tmp_path):
    values = {"data": str(tmp_path), "out": str(tmp_path), "prefix_cache": str(tmp_path),
              "w2v": str(tmp_path / "missing"), "seed": 3, "encoder": None}
    assert provenance.input_paths(values) == {"data": str(tmp_path)}


def test_the_commit_is_git_s_and_read_once_per_process():
    here = os.path.dirname(os.path.abspath(provenance.__file__))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                          text=True).stdout.strip()
    first = provenance.commit()
    assert first["commit"] == head and isinstance(first["dirty"], bool)
    assert provenance.commit() is first      # cached: the code this process imported
    full = provenance.provenance({})
    assert full["commit"] == head and full["machine"]["cores"] == os.cpu_count()
    assert full["versions"]["numpy"]
