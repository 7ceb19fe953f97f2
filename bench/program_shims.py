"""Stand-ins that let real training scripts run for a few steps without their data or extras.

* ``torchvision``: ``datasets.MNIST``/``FashionMNIST``/``CIFAR10``/``CIFAR100`` hold random images
  of the real data set's size and shape (nothing is downloaded), ``FakeData`` those of the size
  asked; ``transforms`` convert and normalise them as torchvision does (``ToTensor``,
  ``Normalize``, ``Resize``; augmentations leave images unchanged), ``utils.save_image`` writes
  nothing;
* every ``DataLoader`` pass yields its first ``BATCHES_PER_PASS`` batches only (``len`` is kept);
* ``visdom``, ``matplotlib``, the TensorBoard loggers and the image writers (``imageio``,
  ``scipy.misc``) accept every call and draw or write nothing;
* ``short_range`` is ``range`` with long loops cut to a few iterations (a 50000-epoch loop runs
  ``LONG_LOOP_ITERATIONS`` times); the harness gives it to each program as its ``range``;
* ``time.time`` is a clock that moves ``CLOCK_TICK_S`` per reading, so that a program that prints
  how long its batches took prints the same before and after a fix.

torchvision is not used even where installed: the CPU build of torch here has no matching wheel,
and synthetic data keeps every run a few seconds long.
"""

from __future__ import annotations

import builtins
import itertools
import sys
import time
import types
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

BATCHES_PER_PASS = 2
LONG_LOOP = 1000  # loops this long or longer are epoch/step loops, cut short
LONG_LOOP_ITERATIONS = 3
CLOCK_TICK_S = 0.001


def short_range(*arguments):
    """``range``, with loops of ``LONG_LOOP`` iterations or more cut to ``LONG_LOOP_ITERATIONS``."""
    full = builtins.range(*arguments)
    return full[:LONG_LOOP_ITERATIONS] if len(full) >= LONG_LOOP else full


class _AcceptsEverything(types.ModuleType):
    """A module (or object) whose every attribute is a callable that does nothing and returns
    another such object."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _AcceptsEverything(name)

    def __call__(self, *args, **kwargs) -> Any:
        return _AcceptsEverything("result")

    def __iter__(self):
        return iter(())


class _SyntheticImages(Dataset):
    """Random uint8 images and labels shaped like the named data set."""

    image_shape = (28, 28)
    classes = 10
    sizes = (60000, 10000)  # train, test

    def __init__(self, root=None, train=True, transform=None, target_transform=None, download=False, **_):
        generator = torch.Generator().manual_seed(0 if train else 1)
        size = self.sizes[0] if train else self.sizes[1]
        self.data = torch.randint(0, 256, (size, *self.image_shape), dtype=torch.uint8, generator=generator)
        self.targets = torch.randint(0, self.classes, (size,), generator=generator)
        self.transform, self.target_transform = transform, target_transform
        # Old torchvision names that tutorials still use.
        self.train_data = self.test_data = self.data
        self.train_labels = self.test_labels = self.targets

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        image, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target


class _MNIST(_SyntheticImages):
    pass


class _CIFAR10(_SyntheticImages):
    image_shape = (32, 32, 3)
    sizes = (50000, 10000)


class _CIFAR100(_CIFAR10):
    classes = 100


class _FakeData(_SyntheticImages):
    """``datasets.FakeData``: random images of the size asked for (channels first, as given)."""

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None, target_transform=None, **_):
        channels, height, width = image_size
        self.image_shape, self.classes, self.sizes = (height, width, channels), num_classes, (size, size)
        super().__init__(train=True, transform=transform, target_transform=target_transform)


def _to_tensor(image) -> torch.Tensor:
    """torchvision's ``ToTensor``: HxW or HxWxC uint8 to CxHxW float in [0, 1]."""
    image = torch.as_tensor(image)
    if image.dim() == 2:
        image = image.unsqueeze(-1)
    if image.dtype == torch.uint8:
        return image.permute(2, 0, 1).float().div(255)
    return image


class _Transforms(types.ModuleType):
    """``torchvision.transforms``: conversion and normalisation as torchvision does them;
    augmentations are identities."""

    def __init__(self) -> None:
        super().__init__("torchvision.transforms")

    @staticmethod
    def Compose(steps):
        def apply(image):
            for step in steps:
                image = step(image)
            return image

        return apply

    @staticmethod
    def ToTensor():
        return _to_tensor

    @staticmethod
    def Lambda(function):
        return function

    @staticmethod
    def Normalize(mean, std, inplace=False):
        def normalize(image):
            shape = (-1, 1, 1)
            # In place on a copy, as torchvision does: three means on a one-channel image raise.
            return image.clone().sub_(torch.tensor(mean).view(shape)).div_(torch.tensor(std).view(shape))

        return normalize

    @staticmethod
    def Resize(size, *args, **kwargs):
        def resize(image):
            tensor = _to_tensor(image) if not torch.is_floating_point(torch.as_tensor(image)) else image
            target = (size, size) if isinstance(size, int) else tuple(size)
            return F.interpolate(tensor.unsqueeze(0), size=target, mode="bilinear", align_corners=False)[0]

        return resize

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: (lambda image: image)


def _torchvision() -> types.ModuleType:
    torchvision = types.ModuleType("torchvision")
    torchvision.__path__ = []  # a package, so that "from torchvision.x import y" works
    datasets = types.ModuleType("torchvision.datasets")
    datasets.MNIST = datasets.FashionMNIST = _MNIST
    datasets.CIFAR10, datasets.CIFAR100, datasets.FakeData = _CIFAR10, _CIFAR100, _FakeData
    utils = types.ModuleType("torchvision.utils")
    utils.save_image = lambda *args, **kwargs: None
    utils.make_grid = lambda tensor, *args, **kwargs: tensor
    torchvision.datasets, torchvision.transforms, torchvision.utils = datasets, _Transforms(), utils
    return torchvision


def _short_passes(real_iter):
    def __iter__(loader):
        iterator = real_iter(loader)
        for _ in builtins.range(BATCHES_PER_PASS):
            try:
                yield next(iterator)
            except StopIteration:
                return

    return __iter__


def _steady_clock():
    """A ``time.time`` whose readings depend only on how many came before."""
    start, readings = time.time(), itertools.count()
    return lambda: start + next(readings) * CLOCK_TICK_S


def install() -> None:
    """Put the stand-ins in ``sys.modules`` ahead of anything installed, shorten every
    ``DataLoader`` pass and steady the clock."""
    torch.utils.data.DataLoader.__iter__ = _short_passes(torch.utils.data.DataLoader.__iter__)
    time.time = _steady_clock()
    torchvision = _torchvision()
    sys.modules.update(
        {
            "torchvision": torchvision,
            "torchvision.datasets": torchvision.datasets,
            "torchvision.transforms": torchvision.transforms,
            "torchvision.utils": torchvision.utils,
        }
    )
    drawers = ("visdom", "matplotlib", "matplotlib.pyplot", "tensorboardX", "tensorboard_logger", "imageio", "scipy", "scipy.misc")
    for name in drawers:
        sys.modules[name] = _AcceptsEverything(name)
    sys.modules["matplotlib"].pyplot = sys.modules["matplotlib.pyplot"]
    sys.modules["scipy"].misc = sys.modules["scipy.misc"]
