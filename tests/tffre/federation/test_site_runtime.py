"""A site's runtime parses each job text once per run (issue 68 item 2), not once per message:
counted around ``DeployJob.from_json`` in a 3-round in-process deployment (plain and under
SecAgg+, whose collect stage read the job a second time per round)."""

import collections
import json

import pytest

from deploy_fakes import FakeGrid, TinyTask, run_config
from tiny import client_arrays

from tffre.deploy.client_app import NodeRuntime, make_client_app
from tffre.deploy.server_app import run_server
from tffre.tasks.sites import DeployJob

SITES = ("a", "b", "c")
ARRAYS = dict(zip(SITES, client_arrays([8, 10, 6], seed=1)))
SECURE = {"secagg": True, "secagg-max-weight": 16.0, "secagg-clip": 8.0}


def counted_run(tmp_path, monkeypatch, **config):
    """3 rounds of FedAvg over sites a, b and c; returns ({(who, job text): parses}, the run's
    job text). ``who``: the site whose ClientApp was answering, else "server"."""
    parse = DeployJob.from_json.__func__
    counts, current = collections.Counter(), ["server"]

    def counted(cls, text):
        counts[current[0], text] += 1
        return parse(cls, text)
    monkeypatch.setattr(DeployJob, "from_json", classmethod(counted))

    def at(site, app):
        def answer(*args, **kwargs):
            current[0] = site
            try:
                return app(*args, **kwargs)
            finally:
                current[0] = "server"
        return answer
    task = TinyTask(ARRAYS)
    nodes = {s: (at(s, make_client_app(NodeRuntime(task))),
                 {"site": s, "state-dir": str(tmp_path / s)}) for s in SITES}
    out = tmp_path / "out"
    run_server(FakeGrid(nodes), run_config("FedAvg", out, **config), task=task)
    saved = json.loads((out / "deploy.json").read_text())
    assert json.loads(saved["job"])["labels"] != json.loads(saved["head"])["labels"]
    return counts, saved["job"], saved["head"]


@pytest.mark.parametrize("config", [{}, SECURE], ids=["plain", "secagg"])
def test_a_site_parses_each_job_once_in_a_three_round_run(config, tmp_path, monkeypatch):
    counts, job, head = counted_run(tmp_path, monkeypatch, **config)
    for site in SITES:
        # Before (commit 7b82568): 7 parses a site (hello, 3 trains, 3 evaluations), 10 under
        # SecAgg+ (its collect stage parsed the job again after the runtime had).
        parsed = {text: n for (who, text), n in counts.items() if who == site}
        # The hello's job (before the sites' labels) and the run's job: once each.
        assert parsed == {head: 1, job: 1}, (site, sorted(parsed.values()))
    assert not [text for who, text in counts if who == "server"]   # a fresh run reads none


def test_the_job_cache_keeps_the_newest_texts():
    runtime = NodeRuntime(TinyTask(ARRAYS))
    jobs = [DeployJob(task="t", dataset="synthetic", algorithm="FedAvg", hparams={},
                      options={}, batch_size=4, seed=s)
            for s in range(6)]
    first = runtime.job_of(jobs[0].to_json())
    assert first == jobs[0] and runtime.job_of(jobs[0].to_json()) is first
    for job in jobs[1:]:
        assert runtime.job_of(job.to_json()) == job
    assert runtime.job_of(jobs[0].to_json()) is not first   # evicted, parsed again
