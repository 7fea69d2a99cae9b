"""Medical image classification (FedCB Tables 2-5) on ResNet-18.

Loads OCT-C8 (its official train/val/test split; the embedded invented sample
by default) or Kvasir-v2 (a seeded, stratified 7:1:2 split) from folders of
class folders (:mod:`tffre.data.image_sets`), splits the training images over the
clients by label Dirichlet(β = ``--alpha``), as FedCB does, or IID, and builds
ResNet-18 with a linear head (:func:`tffre.models.resnet.resnet18_classifier`).
FedCB and FedETF replace the head with their frozen classifiers, FedRoD adds
a personal head (each algorithm's ``model_fn``). The class concepts FedCB
embeds come from ``--concept-file`` or the built-in names
(:mod:`tffre.data.concepts`). Validation and test images are dealt evenly
over the clients; the evaluation pools them (a common test set, as the
paper's), reporting accuracy and macro-F1.

Across sites (``python -m tffre deploy``, :class:`ImageSites`): each site's node
configuration names its own image folder (``data``: OCT-C8's train/val/test layout, or
Kvasir-v2's class folders split 7:1:2 with the run's seed); the sites must hold the same
classes, and each trains on its own train split and evaluates its val and test splits.
"""
import dataclasses
import os

from tffre import resources
from tffre.hparams import boolean, choice, non_negative_float, param, positive_int
from tffre.lazy import np
from tffre.runner.run_settings import Job
from tffre.tasks import (SAMPLE, ConceptOption, DataOption, Task, data_path, label_mix_writer,
                         require_data)
from tffre.tasks.sites import (SiteData, SiteDataError, SiteModel, Sites, check_report_line,
                               site_path)

SAMPLE_DIR = resources.path("image_sample")
PARTITIONS = ("label-dirichlet", "iid")


@dataclasses.dataclass(frozen=True)
class Options(DataOption, ConceptOption):
    """The medical image sets' options."""
    partition: str = param("label-dirichlet", choice(*PARTITIONS), "how the training images "
                           "are split over clients")
    alpha: float = param(0.5, non_negative_float, "Dirichlet concentration of each label "
                         "over clients (FedCB's beta)", paper="FedCB Sect. 4")
    image_size: int = param(32, positive_int, "images are resized to N x N (the sample is "
                            "32x32; the paper's ResNet-18 takes 224)")
    resnet_width: int = param(64, positive_int, "ResNet-18's first-stage channels (64: the "
                              "standard 11.2M-parameter net; smaller for CPU runs)")
    small_input: bool = param(False, boolean, "ResNet-18 with a 3x3 stride-1 stem and no max "
                              "pool (for small images)", flag=True)


TASK = Task("images", "medical image classification (FedCB Tables 2-5)", ("oct-c8", "kvasir"),
            ("resnet18",), Options, defaults={"clients": 10, "batch_size": 8},
            dataset_defaults={"oct-c8": {"clients": 12, "data": SAMPLE}},
            samples={"oct-c8": SAMPLE_DIR},
            # TF 2.14's oneDNN convolutions corrupt memory (double free, segfault) when a
            # compiled ResNet step sees a batch of another size (a client's last batch);
            # without oneDNN they are also faster on these small images (DEVELOPERS.md).
            environment={"TF_ENABLE_ONEDNN_OPTS": "0"},
            dp_refusal="ResNet-18's BatchNorm statistics are averaged without noise, which "
            "client-level DP does not cover")


def check(cfg):
    """The options' checks that need no data."""
    require_data(cfg)
    if cfg.options.partition == "label-dirichlet" and not cfg.options.alpha > 0:
        raise ValueError(f"--alpha must be > 0 for the Dirichlet partition, got "
                         f"{cfg.options.alpha}")


def check_data(dataset, options, *, tokenizer=None, max_len=None, seed=0):
    """The data check of what a run would load (``python -m tffre data check``): the image
    files per class and split, unreadable images and images of an odd size."""
    from tffre.data.check import check_dataset
    path = data_path(dataset, options.data)
    # OCT-C8 ships its train/val/test folders; Kvasir-v2 is split 7:1:2 (load's loaders).
    return check_dataset("images", dataset, path, seed=seed,
                         split_folders=dataset == "oct-c8")


def load_images(dataset, path, image_size, seed):
    """({"train", "val", "test": (x, y)}, class names) of the image set in ``path``, every
    image resized to ``image_size`` x ``image_size``: OCT-C8's official split, or Kvasir-v2's
    folders split 7:1:2 with ``seed`` (:mod:`tffre.data.image_sets`). A run loads its one folder
    with it, a deployed site its own."""
    from tffre.data.image_sets import load_kvasir, load_oct_c8
    size = (image_size, image_size)
    if dataset == "oct-c8":
        return load_oct_c8(path, size)
    return load_kvasir(path, size, seed=seed)


def load(cfg):
    """({"train", "val", "test": (x, y)}, class names) of ``cfg``'s image set."""
    o = cfg.options
    return load_images(cfg.dataset, data_path(cfg.dataset, o.data), o.image_size,
                       cfg.run.seed)


def build_model(num_classes, *, image_size, resnet_width, small_input, seed):
    """(model_fn, loss) of the task's ResNet-18 for ``num_classes`` classes: what a run trains
    and what each side of a deployment builds (:class:`ImageSites`), from the same options
    and seed."""
    import tensorflow as tf
    from tffre.models.resnet import resnet18_classifier
    shape = (image_size, image_size, 3)

    def model_fn():
        return resnet18_classifier(shape, num_classes, small_input=small_input,
                                   base_width=resnet_width, seed=seed)

    return model_fn, tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def prepare(cfg):
    """Loads and splits the image set of ``cfg``; returns the :class:`Job`."""
    from tffre.data import FederatedData
    from tffre.data.concepts import concepts_for
    from tffre.data.partition import (dirichlet_label_split, format_label_mix, iid_split,
                                      label_mix)
    from tffre.metrics import trivial_baselines
    from tffre.text.encoder import ImageEncoder

    o, seed, num_clients = cfg.options, cfg.run.seed, cfg.run.clients
    splits, class_names = load(cfg)
    x_train, y_train = splits["train"]
    if o.partition == "iid":
        parts = iid_split(len(y_train), num_clients, seed)
    else:
        parts = dirichlet_label_split(y_train, num_clients, o.alpha, seed)
    held_out = {name: iid_split(len(splits[name][1]), num_clients, seed + 1)
                for name in ("val", "test")}
    clients = {}
    for k, part in enumerate(parts):
        clients[f"client_{k}"] = {
            "train": (x_train[part], y_train[part]),
            # "dev" is the runner's name for the validation split.
            "dev": (splits["val"][0][held_out["val"][k]], splits["val"][1][held_out["val"][k]]),
            "test": (splits["test"][0][held_out["test"][k]],
                     splits["test"][1][held_out["test"][k]])}
    skew = "IID" if o.partition == "iid" else f"label Dirichlet beta={o.alpha}"
    source = "invented sample" if o.data == SAMPLE else o.data
    data = FederatedData(clients, num_classes=len(class_names),
                         name=f"{cfg.dataset} ({source}), {num_clients} clients, {skew}")
    mix = label_mix(y_train, parts, label_names=list(range(len(class_names))))
    mix.columns = [class_names[c] if isinstance(c, (int, np.integer)) else c
                   for c in mix.columns]
    concepts = concepts_for(class_names, o.concept_file)
    y_test = splits["test"][1]
    info = {"labels": class_names, "concepts": concepts, "image_size": o.image_size,
            "resnet_width": o.resnet_width, "small_input": o.small_input,
            "train_examples": int(len(y_train)), "test_examples": int(len(y_test)),
            **trivial_baselines(y_train, y_test, len(class_names))}
    print(f"\n{data.name}: {len(y_train)} train / {len(splits['val'][1])} val / "
          f"{len(y_test)} test images, {len(class_names)} classes")
    print(format_label_mix(mix))
    model_fn, loss = build_model(len(class_names), image_size=o.image_size,
                                 resnet_width=o.resnet_width, small_input=o.small_input,
                                 seed=seed)
    return Job(data=data, model_fn=model_fn, loss=loss,
               title=f"{data.name}, ResNet-18 (width {o.resnet_width})",
               label_names=class_names, encoder=ImageEncoder(o.image_size), info=info,
               write_extras=label_mix_writer(mix, data.name),
               concepts=concepts, prompts="image",
               macro_f1=True)


class ImageSites(Sites):
    """Medical image classification across sites (:mod:`tffre.tasks.sites`).

    Node configuration: ``data``, the site's image folder as ``--data`` names it for the
    run's dataset: OCT-C8's ``train/``, ``val/``, ``test/`` folders of class folders ("sample":
    the embedded sample), or Kvasir-v2's class folders, split 7:1:2 with the run's seed as
    :func:`load_images` splits them. The labels are the class folder names; every site must
    hold the same classes (:attr:`AGREED`), else the server leaves it out. A site trains on
    its train split and evaluates its val (``dev``) and test splits, resized as a run resizes
    them (``image-size``); the server adds the sites' counts into the macro-F1 a run reports.

    FedCB's class concepts are the server's (:meth:`tffre.tasks.sites.Sites.agree`): its
    ``concept-file``, or the built-in names of the agreed labels; the sites read no concept
    file.
    """

    #: FedCB puts the class concepts in its image prompts.
    PROMPTS = "image"
    #: What a site's data must share with the others': the classes, in label order.
    AGREED = ("labels",)

    @staticmethod
    def _options(job):
        """The job's :class:`Options` that shape the model and the images (the defaults for
        those a job does not name). The concept file is the server's: not checked here."""
        names = ("image_size", "resnet_width", "small_input")
        return Options.resolve({k: job.options[k] for k in names if k in job.options})

    @staticmethod
    def _folder(dataset, site):
        """The site's image folder (``data``; "sample": the embedded one for OCT-C8)."""
        if site.get("data") == SAMPLE:
            return data_path(dataset, SAMPLE)
        return site_path(site, "data")

    @staticmethod
    def _dataset(dataset):
        if dataset not in TASK.datasets:
            raise SiteDataError(f"the image task reads {' or '.join(TASK.datasets)}, not "
                                f"{dataset!r}")
        return dataset

    def _listing(self, job, site):
        """({split: (files, y)}, class names) of the site's folder, listed, not decoded: the
        loader's own listing (:func:`tffre.data.image_sets.list_image_splits`)."""
        from tffre.data.image_sets import ImageFolderError, list_image_splits
        dataset = self._dataset(job.dataset)
        path = self._folder(dataset, site)
        try:
            return list_image_splits(path, split_folders=dataset == "oct-c8", seed=job.seed)
        except ImageFolderError as err:   # one line naming the folder or file
            raise SiteDataError(str(err)) from None

    def survey(self, job, site):
        """{labels: the class folder names, examples: the training images} of the site's
        folder, listed without decoding (:class:`tffre.tasks.sites.SiteDataError` if bad)."""
        files, class_names = self._listing(job, site)
        return {"labels": list(class_names), "examples": int(len(files["train"][1]))}

    def model(self, job, site):
        """The job's ResNet-18 (:func:`build_model`, as a run builds it) as a
        :class:`tffre.tasks.sites.SiteModel`, reporting macro-F1 as FedCB's tables do; a
        bundle saves the image encoder (the image size)."""
        import tensorflow as tf
        from tffre.text.encoder import ImageEncoder
        o = self._options(job)
        model_fn, loss = build_model(len(job.labels), image_size=o.image_size,
                                     resnet_width=o.resnet_width, small_input=o.small_input,
                                     seed=job.seed)
        # The loaders' dtypes: float32 images in [0, 1], int32 labels.
        spec = (tf.TensorSpec((None, o.image_size, o.image_size, 3), tf.float32),
                tf.TensorSpec((None,), tf.int32))
        return SiteModel(model_fn=model_fn, loss=loss, input_spec=spec,
                         encoder=ImageEncoder(o.image_size), macro_f1=True)

    def site_data(self, job, site):
        """The site's images as :class:`tffre.tasks.sites.SiteData`: train, and the held-out
        ``dev`` (val) and ``test`` splits, read as a run reads its folder
        (:func:`load_images`) with the job's image size and seed."""
        from tffre.data.image_sets import ImageFolderError
        dataset = self._dataset(job.dataset)
        path = self._folder(dataset, site)
        try:
            splits, class_names = load_images(dataset, path, self._options(job).image_size,
                                              job.seed)
        except ImageFolderError as err:
            raise SiteDataError(str(err)) from None
        if list(class_names) != list(job.labels):
            raise SiteDataError(f"{path}: classes {list(class_names)} differ from the run's "
                                f"{list(job.labels)}")
        # "dev" is the runner's name for the validation split, as prepare's clients have it.
        return SiteData(train=splits["train"],
                        held_out={"dev": splits["val"], "test": splits["test"]})

    def check_site(self, site, dataset=None):
        """A site's data before it starts (:func:`tffre.tasks.sites.check_site_data`): one
        line on what it holds, or :class:`tffre.tasks.sites.SiteDataError` naming the first
        problem. The folder is checked as ``python -m tffre data check --dataset DATASET
        --data PATH`` checks it (:func:`check_data`); without ``dataset``, as OCT-C8 when it
        holds train/, val/ and test/ folders, else as Kvasir-v2's class folders."""
        from tffre.data.image_sets import SPLITS
        if dataset:
            path = self._folder(self._dataset(dataset), site)
        else:
            path = site_path(site, "data")
            if not os.path.isdir(path):
                raise SiteDataError(f"{path}: no such folder (a site's images are a folder "
                                    f"of class folders)")
            split = all(os.path.isdir(os.path.join(path, s)) for s in SPLITS)
            dataset = "oct-c8" if split else "kvasir"
        try:
            report = check_data(dataset, Options.resolve({"data": path}))
        except ValueError as err:   # a missing folder or split folder: one line
            raise SiteDataError(" ".join(str(err).split())) from None
        return check_report_line(report, dataset, path)


#: What ``python -m tffre deploy`` runs at each side (:mod:`tffre.tasks.sites`).
SITES = ImageSites()
