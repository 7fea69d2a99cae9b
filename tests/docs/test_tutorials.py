"""The tutorials (``docs/tutorials/*.md``) work as written: their code blocks run, in order, on
the embedded samples, and what a page says a command prints is what it prints.

The convention, in each page (HTML comments, which the site does not show):

* ``<!-- test -->`` before a ```bash or ```python block: this test runs it. A page is one
  session: its blocks run in order in one fresh folder that holds links to the checkout's
  ``.venv`` and ``examples/``, as the repository root does. A bash block runs with ``bash -e -o
  pipefail``, the venv's ``python`` first on ``PATH``, and must exit 0; ``<!-- test: exit N -->``
  expects exit status N instead (a refusal the page shows). Python blocks run in this process,
  in one namespace per page.
* ``<!-- output -->`` before a ```text block: what the last tested block printed (stdout, then
  stderr). Each of its lines must appear in that output, in order, runs of spaces compared as
  one, and ``...`` in a line stands for anything (a time, a path). Numbers are compared by
  value: an integer exactly, a decimal within :data:`REL` of it or :data:`ABS` (what a
  machine's arithmetic moves in a few rounds of training, not what a change of behaviour
  moves). So the printed tables keep their rows, columns, words and values.
* ``<!-- not tested: REASON -->`` before a block the suite cannot run, REASON one of
  :data:`NOT_RUN`'s keys, which say why and what covers it instead. Their ``python -m tffre
  run``, ``examples/*.py`` presets and ``python -m tffre deploy`` commands are still parsed by
  the command line's own parsers (:func:`check_arguments`), so an unknown flag fails here.

Every ```bash and ```python block carries one of these marks (test_every_block_is_marked), and
the plain-Flower block of ``deploy.md`` is the one ``tests/tffre/deploy/test_deploy_repeat.py``
parses and (opt-in) runs.

What does not run here (NOT_RUN says why, and what covers it):

* first-run.md: ``bash install.sh`` (install); the full main job, as the example and as
  ``python -m tffre run`` (long: about two minutes);
* your-data.md: the ``cd`` into a scratch folder (folder); the real IMCS-V2 command
  (real-data); the relation, document and image runs on the page's own sets (long: 35-168 s
  each here);
* deploy.md: the ``cd`` into a scratch folder (folder); ``examples/deploy_local.py``, the
  SuperLink, the registrations, the SuperNodes, the run and the stop of the step-by-step part,
  and the across-machines commands (daemons; the step-by-step part was run as written by hand,
  77 s); the plain-Flower block (plain-flower);
* privacy.md: the 30- and 40-round runs of the last section (long).

Time: three runs of 2-3 rounds on the IMCS sample (first-run, your-data, privacy), one
``predict``, ``data check``s (no TensorFlow), a few refusals, and the library page's Keras and
TFF code in this process: 81 s for this file on a 2-core machine with a benchmark running beside
it (first-run 19 s, your-data 20 s, deploy 2 s, privacy 24 s, library 13 s).
"""

import contextlib
import io
import os
import re
import subprocess
import sys

import pytest

from doc_blocks import commands

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TUTORIALS = os.path.join(ROOT, "docs", "tutorials")
PAGES = ("first-run.md", "your-data.md", "deploy.md", "privacy.md", "library.md")
BUDGET = 300   # seconds per block: a bound against a hang, not a speed test

#: Why a block does not run in the suite, and what runs it (or its equivalent) instead.
NOT_RUN = {
    "install": "installs the environment the suite runs in (bash install.sh; CI's .ci/run "
               "runs it on a fresh clone)",
    "long": "a full job: minutes on 2 cores (the main job's 12 rounds of four algorithms; "
            "a relation or image run, which loads an encoder or a ResNet); its flags are "
            "parsed here, and each task's runs are tested in tests/tffre/",
    "real-data": "needs a corpus or vectors the repository does not ship "
                 "(docs/real-corpora.md); its flags are parsed here",
    "daemons": "starts long-running processes on several ports (a SuperLink, three SuperNodes): "
               "about 100 s; tests/tffre/deploy/test_deploy_tasks_equality.py runs three sites "
               "on loopback against the local executor, and test_deploy_repeat.py the deploy "
               "commands with TLS and registered keys",
    "folder": "moves the reader's shell to a scratch folder of their own; each page runs here in "
              "a fresh folder already",
    "plain-flower": "Flower's own commands: tests/tffre/deploy/test_deploy_repeat.py parses this "
                    "block and runs it (opt-in, TFFRE_DEPLOY_PLAIN=1: 95-106 s)",
}
MARK = re.compile(r"<!--\s*(test(?::\s*exit\s+(?P<exit>\d+))?|output|not tested:\s*(?P<why>[\w-]+))"
                  r"\s*-->\s*\n```(?P<lang>\w*)\n(?P<code>.*?)^```", re.S | re.M)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
PLAIN_FLOWER = "# Plain Flower: a SuperLink and two sites on one machine"


def read(page):
    with open(os.path.join(TUTORIALS, page), encoding="utf-8") as f:
        return f.read()


def blocks(page):
    """The page's marked blocks in order: (mark, expected exit, reason, language, code)."""
    out = []
    for m in MARK.finditer(read(page)):
        mark = m.group(1).split(":")[0].strip()
        mark = "not tested" if mark.startswith("not") else mark
        out.append((mark, int(m.group("exit") or 0), m.group("why"), m.group("lang"),
                    m.group("code")))
    return out


NUMBER = r"-?\d+(?:\.\d+)?"
REL, ABS = 0.02, 0.005   # a decimal's tolerance: 2% of it, or 0.005


def shape(line):
    """A line as compared: runs of spaces as one."""
    return " ".join(line.split())


def pattern_of(line):
    """(regex, numbers) of a shown line: each number a group, ``...`` anything."""
    parts = []
    for piece in shape(line).split("..."):
        chunks = re.split(f"({NUMBER})", piece)
        parts.append("".join(f"({NUMBER})" if i % 2 else re.escape(c)
                             for i, c in enumerate(chunks)))
    return re.compile(".*".join(parts)), re.findall(NUMBER, "".join(shape(line).split("...")))


def same_number(want, got):
    """An integer exactly; a decimal within REL or ABS."""
    if "." not in want:
        return want == got
    return abs(float(got) - float(want)) <= max(ABS, REL * abs(float(want)))


def assert_shows(shown, printed, where):
    """Every non-blank line of ``shown`` matches a line of ``printed``, in order, numbers by
    value (:func:`same_number`)."""
    lines = [shape(line) for line in printed.splitlines()]
    at = 0
    for want in shown.splitlines():
        if not want.strip() or want.strip() == "...":
            continue
        pattern, numbers = pattern_of(want)
        for i in range(at, len(lines)):
            found = pattern.fullmatch(lines[i])
            if found and all(same_number(w, g) for w, g in zip(numbers, found.groups())):
                at = i + 1
                break
        else:
            raise AssertionError(f"{where}: the page shows {want!r}, which is not in what the "
                                 f"block printed (after line {at}):\n{printed[-4000:]}")


def check_arguments(words):
    """Parses one command of a block that does not run with the parser that would read it:
    ``python -m tffre run``, an ``examples/*.py`` preset of it, ``python -m tffre deploy``."""
    from tffre import cli
    from tffre.deploy import commands as deploy_cli
    if words[0] != "python":
        return
    if words[1:4] == ["-m", "tffre", "run"]:
        parse = lambda: cli.build_run_parser().parse_args(words[4:])  # noqa: E731
    elif re.fullmatch(r"examples/\w+\.py", words[1]):
        with open(os.path.join(ROOT, words[1]), encoding="utf-8") as f:
            if "run_main" not in f.read():   # deploy_local.py: its own options
                return
        parse = lambda: cli.build_run_parser().parse_args(words[2:])  # noqa: E731
    elif words[1:5] == ["-m", "tffre", "deploy", "run"]:
        def parse():
            os.remove(deploy_cli.run_config_file(words[5:], "deploy")[1])
    elif words[1:4] == ["-m", "tffre", "deploy"]:
        parse = lambda: deploy_cli.build_parser().parse_args(words[4:])  # noqa: E731
    else:
        return
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            parse()
        except SystemExit as stop:
            assert stop.code == 0, f"{' '.join(words)}: {err.getvalue().strip()}"


@pytest.fixture
def session(tmp_path, monkeypatch):
    """A fresh folder that looks like the repository root: .venv and examples/ linked."""
    os.symlink(sys.prefix, tmp_path / ".venv")
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ.get("PATH", ""))
    return tmp_path, env


@pytest.mark.parametrize("page", PAGES)
def test_the_tutorials_blocks_run_as_written(page, session, capfd):
    folder, env = session
    namespace = {"__name__": "__tutorial__"}
    printed = None
    for n, (mark, status, why, lang, code) in enumerate(blocks(page), 1):
        where = f"{page}, marked block {n}"
        if mark == "not tested":
            if lang == "bash":
                for words in commands(code):
                    check_arguments(words)
        elif mark == "output":
            assert printed is not None, f"{where}: an output with no tested block before it"
            assert_shows(code, printed, where)
        elif lang == "bash":
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=folder,
                                  env=env, capture_output=True, text=True, timeout=BUDGET)
            printed = done.stdout + done.stderr
            assert done.returncode == status, f"{where}: exit {done.returncode}\n{printed[-4000:]}"
        else:
            assert lang == "python" and status == 0, where
            capfd.readouterr()
            # capfd, not a StringIO: TFF's worker is started with this process's stdout
            # descriptor.
            exec(compile(code, where, "exec"), namespace)  # noqa: S102
            printed = capfd.readouterr().out


@pytest.mark.parametrize("page", PAGES)
def test_every_block_is_marked(page):
    text = read(page)
    marked = {m.start("code") for m in MARK.finditer(text)}
    for m in FENCE.finditer(text):
        if m.group(1) in ("bash", "python"):
            line = text.count("\n", 0, m.start()) + 1
            assert m.start(2) in marked, f"{page}, line {line}: a {m.group(1)} block without " \
                                         f"<!-- test -->, <!-- not tested: REASON --> or " \
                                         f"<!-- output -->"
    for mark, _, why, lang, _ in blocks(page):
        if mark == "not tested":
            assert why in NOT_RUN, f"{page}: unknown reason {why!r}; known: {sorted(NOT_RUN)}"
        if mark == "output":
            assert lang == "text", f"{page}: an output block must be ```text"


def test_the_plain_flower_block_is_the_one_test_deploy_repeat_runs():
    """``test_deploy_repeat.py`` reads this block from deploy.md (opt-in): it is still there,
    with the commands that test expects."""
    text = read("deploy.md")
    start = text.index(PLAIN_FLOWER)
    block = text[start:text.index("```", start)]
    assert [words[0] for words in commands(block)] == [
        "source", "python", "python", "flower-superlink", "flwr", "flwr", "flower-supernode",
        "flower-supernode", "flwr"]
