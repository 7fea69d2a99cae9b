"""Command line: ``python -m tffre run ...`` and ``python -m tffre predict ...`` (also ``tffre``).

One flag vocabulary for every dataset (:mod:`tffre.config`), the FLCMC
paper's hyperparameter names, and ``--config FILE`` (JSON or YAML) with the
same names. Examples (FLCMC Table 8 and Table 10):

    python -m tffre run --dataset synthetic --algorithm fedavgs,fedproxp,fedatts,fedpap \\
        --alpha 0.5 --beta 0.5 --num-rounds 100 --clients-per-round 10 \\
        --learning-rate 0.001 --mu 0.03 --stepsize 4 --seed 0 --out results/x
    python -m tffre run --dataset imcs --model lstm --data /path/to/IMCS-V2 --w2v vectors.bin \\
        --algorithm fedavgs,fedpap --num-rounds 100 --clients 20 --out results/imcs
    python -m tffre predict --model results/imcs/models/FedPAP --text "宝宝咳嗽两天了"
    python -m tffre deploy --help     # across sites with Flower (tffre.deploy.commands)

Argument errors answer in one line, before TensorFlow is imported or any
data is read.
"""

import argparse
import os
import sys

# Quieten TensorFlow's C++ logging (CUDA plugin noise on CPU machines) unless the user
# set TF_CPP_MIN_LOG_LEVEL; real errors still surface as Python exceptions.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tffre import config as config_lib  # noqa: E402  (light: no TensorFlow)
from tffre.errors import OneLineParser  # noqa: E402

PROG = "python -m tffre"


def build_parser(prog=PROG):
    """The argument parser of ``python -m tffre``."""
    parser = OneLineParser(prog=prog, description=__doc__.splitlines()[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    sub.add_parser("run", help="train federated algorithms; write metrics, models, plots "
                   "(see run --help)", add_help=False)
    sub.add_parser("predict", help="label new texts with a saved model (see predict --help)",
                   add_help=False)
    data = sub.add_parser("data", help="data check: what a run would load, and every problem "
                          "(see data check --help); data prepare: a published split from a "
                          "public copy", description="Read and check a data set.")
    # main() dispatches `data check` and `data prepare` to their own parsers, so these
    # entries only answer `data --help` and a missing or misspelt action.
    actions = data.add_subparsers(dest="action", required=True, parser_class=OneLineParser)
    actions.add_parser(
        "check", add_help=False, help="what a run of --dataset would load, and every problem "
        "(see data check --help)")
    actions.add_parser("prepare", add_help=False, help="write a corpus's published split from "
                       "a public copy (see data prepare --help)")
    sub.add_parser("deploy", help="run across sites with Flower (see deploy --help)",
                   add_help=False)
    sub.add_parser("report", help="the tables and curves of records and run folders (see "
                   "report --help)", add_help=False)
    return parser


# The run's options a data check reads (each applies to the datasets that declare it).
DATA_CHECK_OPTIONS = ("data", "task", "max_len", "encoder", "user_dict", "dict_from_clients",
                      "raw_labels", "eog_variant", "dev_fraction")


def data_check_main(argv=None, *, prog=f"{PROG} data check"):
    """``data check``: loads exactly what a run of ``--dataset`` would load and prints, per
    split, the examples (documents, dialogues and sentences, images), the labels (IMCS: of
    ``--task``; images: classes), entity-type pairs and the lengths (word pieces with
    ``--encoder`` or, for texts, ``--model encoder``; IMCS and texts: jieba tokens) with how
    many exceed ``--max-len``; then every problem found (the first 20), each naming its file
    and line, record or image. Returns 0 without problems, 1 with, 2 for bad arguments.
    Without a tokenizer it imports no TensorFlow."""
    parser = OneLineParser(prog=prog, description=data_check_main.__doc__.split("\n\n")[0])
    vocab = config_lib.vocabulary()
    parser.add_argument("--dataset", required=True, help=vocab["dataset"].help)
    parser.add_argument("--seed", default="0", help=vocab["seed"].help)
    parser.add_argument("--model", default=None, help="the run's --model: encoder measures "
                        "word pieces (of --encoder, default all-MiniLM-L6-v2) where a task "
                        "offers an encoder beside a word model (--dataset text)")
    for name in DATA_CHECK_OPTIONS:
        flag = vocab[name]
        if flag.flag:
            parser.add_argument(flag.cli, action="store_true", default=argparse.SUPPRESS,
                                help=flag.help)
        else:
            parser.add_argument(flag.cli, default=argparse.SUPPRESS, help=flag.help)
    args = vars(parser.parse_args(argv))
    from tffre import tasks
    from tffre.hparams import seed as parse_seed
    try:
        dataset = args.pop("dataset")
        task = tasks.task_of(dataset)
        if not task.checks_data:
            raise ValueError(f"--dataset {dataset} has no data check (the {task.name} task "
                             "declares none)")
        seed = parse_seed(args.pop("seed"))
        model = args.pop("model")
        if model is not None and model not in task.models:
            raise ValueError(f"--model {model}: the {task.name} task's models are "
                             f"{', '.join(task.models)}")
        known = set(task.Options.names())
        for name in args:
            if name not in known:
                raise ValueError(f"{vocab[name].cli} applies to --dataset "
                                 f"{'/'.join(vocab[name].owners)}, not {dataset}")
        defaults = {k: v for k, v in task.defaults_for(dataset).items() if k in known}
        options = task.Options.resolve({**defaults, **args})
        tasks.require_data(argparse.Namespace(dataset=dataset, options=options))
        tokenizer = None
        folder = getattr(options, "encoder", None)  # only the encoder tasks declare it
        if folder is None and model == "encoder" and len(task.models) > 1:
            from tffre.text.relation_tokenizer import default_encoder_dir
            folder = default_encoder_dir()   # the run's default encoder
        if folder:
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        report = task.check_data(dataset, options, tokenizer=tokenizer, seed=seed)
    except ValueError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    print(report.format())
    return report.exit_code


def data_prepare_main(argv=None, *, prog=f"{PROG} data prepare"):
    """``data prepare cdr --from DIR --out DIR``: writes BioCreative V CDR's official
    500/500/500 split from a public copy whose training file also holds the development
    abstracts (:func:`tffre.data.prepare_cdr.prepare_cdr`), and prints what it read, dropped
    and wrote. Returns 0 when written, 1 for bad input or a refused --out, 2 for bad
    arguments."""
    parser = OneLineParser(prog=prog, description=data_prepare_main.__doc__.split("\n\n")[0])
    parser.add_argument("corpus", choices=("cdr",), help="the corpus: cdr (BioCreative V CDR "
                        "in PubTator)")
    parser.add_argument("--from", dest="source", required=True, metavar="DIR",
                        help="the public copy: a folder with the training, development and "
                        "test files (CDR_TrainingSet.PubTator.txt, ...)")
    parser.add_argument("--out", required=True, metavar="DIR", help="the folder to write the "
                        "split to, under the names --dataset cdr --data DIR reads")
    parser.add_argument("--overwrite", action="store_true", help="replace the files of a "
                        "non-empty --out")
    args = parser.parse_args(argv)
    from tffre.data.prepare_cdr import prepare_cdr
    try:
        prepared = prepare_cdr(args.source, args.out, overwrite=args.overwrite)
    except (ValueError, OSError) as err:   # DocREFormatError, PrepareError: one line each
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    print(prepared.format())
    return 0


def build_run_parser(prog=f"{PROG} run"):
    """The parser of ``run``: every option of :func:`tffre.config.vocabulary`."""
    parser = OneLineParser(prog=prog, description="Train federated algorithms and write "
                           "metrics.csv, summary.json, curves.png and the final models to --out.")
    config_lib.add_run_arguments(parser)
    return parser


def run_main(argv=None, *, preset=None, prog=f"{PROG} run", fixed=None):
    """``run``: checks every argument, then runs the experiment. Returns the exit code.

    Args:
      argv: the arguments after ``run``.
      preset: {option: value} defaults an example sets, below --config and the flags.
      prog: the program name shown in messages.
      fixed: {option: value} that win over the flags too: what an example's extra run is
        (an ablation's algorithms and alpha).
    """
    args = build_run_parser(prog).parse_args(argv)
    given = {k: v for k, v in vars(args).items() if k != "config"}
    given.update(fixed or {})
    try:
        cfg = config_lib.resolve(given, preset=preset, config_path=args.config)
    except config_lib.ConfigError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    if "tensorflow" not in sys.modules:
        # What the task needs set before TensorFlow reads it at import (the image task:
        # TF_ENABLE_ONEDNN_OPTS=0, see DEVELOPERS.md).
        for key, value in cfg.task.environment.items():
            os.environ.setdefault(key, value)
    from tffre import experiments  # heavy imports only after the arguments are checked
    try:
        if cfg.run.resume:
            config_lib.check_resume(cfg)
        experiments.run(cfg)
    except config_lib.ConfigError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as err:
        # Bad data: the message names the file, record and field. Rows computed so far
        # stay in --out.
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"interrupted; rows so far are in {cfg.run.out}/metrics.csv (continue with "
              f"--resume)", file=sys.stderr)
        return 130
    written = [name for name in ("metrics.csv", "summary.json", "curves.png", "models/",
                                 "checkpoints/", "tensorboard/")
               if os.path.exists(os.path.join(cfg.run.out, name.rstrip("/")))]
    print(f"wrote {cfg.run.out}/: {', '.join(written)}")
    return 0


def main(argv=None, *, prog=PROG):
    """Entry point of ``python -m tffre``; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["predict"]:
        from tffre import predict
        return predict.main(argv[1:], prog=f"{prog} predict")
    if argv[:1] == ["run"]:
        return run_main(argv[1:], prog=f"{prog} run")
    if argv[:2] == ["data", "check"]:
        return data_check_main(argv[2:], prog=f"{prog} data check")
    if argv[:2] == ["data", "prepare"]:
        return data_prepare_main(argv[2:], prog=f"{prog} data prepare")
    if argv[:1] == ["report"]:
        from tffre import report
        return report.main(argv[1:], prog=f"{prog} report")
    if argv[:1] == ["deploy"]:
        # tffre.deploy sits in this (the CLI) layer and never imports tffre.cli back.
        from tffre.deploy import commands as deploy_cli
        return deploy_cli.main(argv[1:], prog=f"{prog} deploy")
    build_parser(prog).parse_args(argv)  # --help, or a one-line error
    return 2


if __name__ == "__main__":
    sys.exit(main())
