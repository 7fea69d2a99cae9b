"""Medical image classification (FedCB Tables 2-5) on ResNet-18, written as one
:class:`tffre.tasks.recipe.Recipe`: the simulation and every deployed site are derived from
:data:`RECIPE`.

Loads OCT-C8 (its official train/val/test split; the embedded invented sample
by default) or Kvasir-v2 (a seeded, stratified 7:1:2 split) from folders of
class folders (:mod:`tffre.data.image_sets`), splits the training images over the
clients by label Dirichlet(β = ``--alpha``), as FedCB does, or IID, and builds
ResNet-18 with a linear head (:func:`tffre.models.resnet.resnet18_classifier`).
FedCB and FedETF replace the head with their frozen classifiers, FedRoD adds
a personal head (each algorithm's ``model_fn``). The class concepts FedCB
embeds come from ``--concept-file`` or the built-in names
(:mod:`tffre.data.concepts`), in FedCB's image prompts. Validation and test images are
dealt evenly over the clients; the evaluation pools them (a common test set, as the
paper's), reporting accuracy and macro-F1.

Across sites (``python -m tffre deploy``): each site's node configuration names its own
image folder (``data``: OCT-C8's train/val/test layout, "sample" the embedded one, or
Kvasir-v2's class folders split 7:1:2 with the run's seed, as a run splits them); the
labels are the class folder names and every site must hold the same classes, in order
(``AGREED``), else the server leaves it out. A site trains on its train split and evaluates
its val (``dev``) and test splits, resized as a run resizes them; the server adds the sites'
counts into the macro-F1 a run reports. FedCB's concepts are the server's
(``concept-file``); the sites read no concept file.
"""
import dataclasses
import os

from tffre import resources
from tffre.hparams import boolean, choice, non_negative_float, param, positive_int
from tffre.tasks import SAMPLE, ConceptOption, DataOption, Task, data_path, require_data
from tffre.tasks.recipe import Built, Evaluation, Loaded, Recipe, Simulated

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


class Images:
    """One split's images as records ({"file", "label"}), listed, not decoded: a site's survey
    reads only the listing (a hello is answered in seconds, not after decoding Kvasir-v2);
    :attr:`x` decodes them once, as the loaders do (:mod:`tffre.data.image_sets`)."""

    def __init__(self, files, y, class_names, size):
        self.files, self.y, self.class_names, self.size = files, y, class_names, size
        self._x = None

    @property
    def x(self):
        """The decoded images, float32 [n, H, W, 3] in [0, 1], resized to ``size``."""
        if self._x is None:
            from tffre.data.image_sets import _read_images
            self._x = _read_images(self.files, self.size)
        return self._x

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if not 0 <= i < len(self.y):   # ends the iteration
            raise IndexError(i)
        return {"file": self.files[i], "label": self.class_names[self.y[i]]}


def _dataset(dataset):
    if dataset not in TASK.datasets:
        raise ValueError(f"the image task reads {' or '.join(TASK.datasets)}, not "
                         f"{dataset!r}")
    return dataset


class ImageRecipe(Recipe):
    """``--dataset oct-c8`` and ``--dataset kvasir`` (see the module docstring)."""

    TASK = TASK
    EVALUATION = "classification"
    #: A bundle saves the image encoder (the image size); ``predict`` reads image files.
    PREDICTS = "image"
    TABLES = ("FedCB Table 2", "FedCB Table 3", "FedCB Table 4", "FedCB Table 5")
    #: The classes, in label order, alike at every site (not united: the folders name them).
    AGREED = ("labels",)
    #: FedCB puts the class concepts in its image prompts.
    PROMPTS = "image"

    def check(self, cfg):
        """``--data`` given; ``--alpha`` above 0 for the Dirichlet partition."""
        require_data(cfg)
        if cfg.options.partition == "label-dirichlet" and not cfg.options.alpha > 0:
            raise ValueError(f"--alpha must be > 0 for the Dirichlet partition, got "
                             f"{cfg.options.alpha}")

    def load(self, path, options, *, seed, notes=None, site=None, dataset=None):
        """The image set in ``path`` as {"train", "dev" (val), "test": :class:`Images`}, each
        image resized to ``--image-size`` when encoded: OCT-C8's official split, or
        Kvasir-v2's folders split 7:1:2 with ``seed`` (:mod:`tffre.data.image_sets`); the
        labels are the class folder names. A run loads its one folder with it, a deployed
        site its own."""
        from tffre.data.image_sets import list_image_splits
        size = (options.image_size, options.image_size)
        # As load_oct_c8 and load_kvasir list them; decoded when encoded (Images.x).
        splits, class_names = list_image_splits(
            path, split_folders=_dataset(dataset) == "oct-c8", seed=seed)
        # "dev" is the runner's name for the validation split.
        return Loaded({name: Images(*splits[split], class_names, size)
                       for name, split in (("train", "train"), ("dev", "val"),
                                           ("test", "test"))},
                      tuple(class_names), notes if notes is not None else [])

    def check_data(self, dataset, options, *, tokenizer=None, max_len=None, seed=0,
                   site=None):
        """The data check of what a run would load (``python -m tffre data check``): the
        image files per class and split, unreadable images and images of an odd size."""
        from tffre.data.check import check_dataset
        path = data_path(dataset, options.data)
        # OCT-C8 ships its train/val/test folders; Kvasir-v2 is split 7:1:2 (load's loaders).
        return check_dataset("images", dataset, path, seed=seed,
                             split_folders=dataset == "oct-c8")

    def check_site(self, site, dataset=None):
        """A site's data before it starts (:func:`tffre.tasks.sites.check_site_data`): one
        line on what it holds, or :class:`tffre.tasks.sites.SiteDataError` naming the first
        problem. The folder is checked as ``python -m tffre data check --dataset DATASET
        --data PATH`` checks it; without ``dataset``, as OCT-C8 when it holds train/, val/
        and test/ folders, else as Kvasir-v2's class folders."""
        from tffre.data.image_sets import SPLITS
        from tffre.tasks.sites import SiteDataError, check_report_line, site_path
        if dataset:
            try:
                _dataset(dataset)
            except ValueError as err:
                raise SiteDataError(str(err)) from None
            path = data_path(dataset, SAMPLE) if site.get("data") == SAMPLE else \
                site_path(site, "data")
        else:
            path = site_path(site, "data")
            if not os.path.isdir(path):
                raise SiteDataError(f"{path}: no such folder (a site's images are a folder "
                                    f"of class folders)")
            split = all(os.path.isdir(os.path.join(path, s)) for s in SPLITS)
            dataset = "oct-c8" if split else "kvasir"
        try:
            report = self.check_data(dataset, Options.resolve({"data": path}))
        except ValueError as err:   # a missing folder or split folder: one line
            raise SiteDataError(" ".join(str(err).split())) from None
        return check_report_line(report, dataset, path)

    def build(self, spec):
        """ResNet-18 for the labels (:func:`tffre.models.resnet.resnet18_classifier`) from
        the options and the seed, as every side builds it; the inputs are the images."""
        import tensorflow as tf
        from tffre.data.image_sets import _read_images
        from tffre.models.resnet import resnet18_classifier
        from tffre.text.encoder import ImageEncoder
        o = spec.options
        shape = (o.image_size, o.image_size, 3)

        def encode(records):
            """A split's images, float32 [n, H, W, 3] in [0, 1]: an :class:`Images`' own
            array, or other records' files decoded."""
            if isinstance(records, Images):
                return records.x
            return _read_images([r["file"] for r in records], shape[:2])

        def model_fn():
            return resnet18_classifier(shape, len(spec.labels), small_input=o.small_input,
                                       base_width=o.resnet_width, seed=spec.seed)

        return Built(model_fn=model_fn,
                     loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                     encode=encode,
                     # The loaders' dtype: float32 images in [0, 1].
                     x_spec=tf.TensorSpec((None,) + shape, tf.float32),
                     encoder=ImageEncoder(o.image_size),
                     description=f"ResNet-18 (width {o.resnet_width})")

    def evaluation(self, options, labels):
        """Accuracy and macro-F1 over all classes, as FedCB's tables report them."""
        return Evaluation(self.EVALUATION, macro_f1=True)

    def partition(self, loaded, options, num_clients, seed):
        """The training images over ``num_clients`` by label Dirichlet(``--alpha``) or IID;
        the val and test images dealt evenly (seed + 1), or under label skew as each client's
        training labels were (:func:`tffre.data.partition.label_following_split`)."""
        from tffre.data.partition import dirichlet_label_split, iid_split, label_following_split
        y_train = loaded.splits["train"].y
        if options.partition == "iid":
            parts = iid_split(len(y_train), num_clients, seed)
            held_out = {name: iid_split(len(loaded.splits[name]), num_clients, seed + 1)
                        for name in ("dev", "test")}
        else:   # the held-out images shared out as each client's training labels were
            parts = dirichlet_label_split(y_train, num_clients, options.alpha, seed)
            held_out = {name: label_following_split(loaded.splits[name].y, y_train, parts,
                                                    seed + 1) for name in ("dev", "test")}
        return {f"client_{k}": {"train": part, "dev": held_out["dev"][k],
                                "test": held_out["test"][k]}
                for k, part in enumerate(parts)}

    def simulate(self, cfg, loaded, resources, built):
        """The clients of :meth:`partition`, the run's info (classes, concepts, the model's
        options, counts, trivial baselines) and each client's label mix, printed and
        written as ``partition.csv``/``.png``."""
        from tffre.data import FederatedData
        from tffre.data.concepts import concepts_for
        from tffre.data.partition import format_label_mix, label_mix
        from tffre.lazy import np
        from tffre.metrics import trivial_baselines
        from tffre.tasks import label_mix_writer
        o, num_clients = cfg.options, cfg.run.clients
        class_names = list(loaded.labels)
        arrays = {split: (built.encode(records), loaded.label_ids(split))
                  for split, records in loaded.splits.items()}
        parts = self.partition(loaded, o, num_clients, cfg.run.seed)
        clients = {cid: {split: (arrays[split][0][idx], arrays[split][1][idx])
                         for split, idx in rows.items()} for cid, rows in parts.items()}
        skew = "IID" if o.partition == "iid" else f"label Dirichlet beta={o.alpha}"
        source = "invented sample" if o.data == SAMPLE else o.data
        data = FederatedData(clients, num_classes=len(class_names),
                             name=f"{cfg.dataset} ({source}), {num_clients} clients, {skew}")
        y_train, y_test = arrays["train"][1], arrays["test"][1]
        mix = label_mix(y_train, [rows["train"] for rows in parts.values()],
                        label_names=list(range(len(class_names))))
        mix.columns = [class_names[c] if isinstance(c, (int, np.integer)) else c
                       for c in mix.columns]
        info = {"labels": class_names, "concepts": concepts_for(class_names, o.concept_file),
                "image_size": o.image_size, "resnet_width": o.resnet_width,
                "small_input": o.small_input, "train_examples": int(len(y_train)),
                "test_examples": int(len(y_test)),
                **trivial_baselines(y_train, y_test, len(class_names))}
        print(f"\n{data.name}: {len(y_train)} train / {len(arrays['dev'][1])} val / "
              f"{len(y_test)} test images, {len(class_names)} classes")
        print(format_label_mix(mix))
        return Simulated(data, info, write_extras=label_mix_writer(mix, data.name))


#: The task's one declaration: ``prepare``, ``check``, ``check_data`` and the deployment's
#: sites are derived from it (:mod:`tffre.tasks.recipe`).
RECIPE = ImageRecipe()
