"""The deployment's job (tffre.tasks.sites.DeployJob) is typed: its hyperparameters are the
algorithm's Hparams object from the moment it is made, and JSON exists only on the wire."""

import dataclasses
import json

from tffre.deploy.tasks import public_hparams
from tffre.registry import get_spec, resolve_hparams
from tffre.tasks.sites import DeployJob


def _job(**hparams):
    return DeployJob(task="synthetic", dataset="synthetic", algorithm="FedProx",
                     hparams=hparams, options={"alpha": 0.5}, batch_size=8, seed=1)


def test_a_jobs_hyperparameters_are_typed_and_round_trip_through_json():
    job = _job(learning_rate=0.05, mu=0.3)
    assert isinstance(job.hparams, get_spec("FedProx").hparams_class())
    assert job.hparams.learning_rate == 0.05 and job.hparams.prox_mu == 0.3
    wire = json.loads(job.to_json())
    assert wire["hparams"]["learning_rate"] == 0.05   # plain JSON in the message
    back = DeployJob.from_json(job.to_json())
    assert back == job and back.key() == job.key()
    assert isinstance(back.hparams, type(job.hparams))


def test_a_job_made_from_typed_hyperparameters_keeps_them():
    typed = resolve_hparams("FedProx", {"learning_rate": 0.2})
    job = dataclasses.replace(_job(), hparams=typed)
    assert job.hparams is typed


def test_the_sites_never_get_the_servers_own_hyperparameters():
    typed = resolve_hparams("FedAvg", {"dp_clip": 1.0, "dp_noise_multiplier": 1.0,
                                       "dp_seed": 1234})
    public = public_hparams(typed)
    assert public.dp_seed is None and typed.dp_seed == 1234
    assert dataclasses.replace(public, dp_seed=1234) == typed


def test_a_jobs_options_are_typed_at_the_server_and_parsed_once_at_a_site():
    """The server's job holds the task's Options; the message holds their mapping, which a
    site's task parses into the same Options, once per job; a deployment task of your own
    gets the mapping."""
    from tffre.tasks import synthetic
    from tffre.tasks.recipe import RecipeSites
    typed = synthetic.Options(alpha=0.5, beta=0.7, iid=False)
    job = dataclasses.replace(_job(), options=typed)
    assert json.loads(job.to_json())["options"] == {"alpha": 0.5, "beta": 0.7, "iid": False}
    wire = DeployJob.from_json(job.to_json())
    assert wire.options == {"alpha": 0.5, "beta": 0.7, "iid": False}
    assert wire.key() == job.key()   # both sides name the same round
    sites = RecipeSites(synthetic.RECIPE)
    assert sites.options(wire) == typed and sites.options(job) is typed
    assert sites.options(wire) is sites.options(wire)   # parsed once
