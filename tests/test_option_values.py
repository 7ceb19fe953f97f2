"""A comparison of a device option with a literal, decided by the option's default, guards the
branch the default does not take when that default means "no GPU" (``-visible_gpus`` defaulting
to ``"-1"``): the user asks for CUDA by naming GPUs. Options about anything else, defaults that
name a GPU, options the file assigns again and names bound twice keep today's judgement
(``knowledge/option_values.py``)."""

from pathlib import Path

import pytest

from torchdevice_lint.knowledge.option_values import about_devices, means_no_gpu
from tests.project_files import project_findings

OPTIONS = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('{}', default={})\n"

#: nlpyang/PreSumm@70b810e src/train.py:117-118, train_extractive.py:214-217, models/model_builder.py:23-27
TRAIN = (
    "import torch\n\n\ndef train(args, state):\n"
    '    device = "cpu" if args.visible_gpus == \'-1\' else "cuda"\n'
    '    device_id = 0 if device == "cuda" else -1\n'
    "    if device_id >= 0:\n        torch.cuda.set_device(device_id)\n"
    "    if args.visible_gpus != '-1':\n        state = state.cuda()\n"
    "    return state.to(device)\n"
)

PLACE = "import torch\n\n\ndef place(gpus, x):\n    if gpus != '-1':\n        x = x.cuda()\n    return x\n"


def codes(root: Path, option: str, default: str, code: str = TRAIN):
    files = {"opts.py": OPTIONS.format(option, default), "train.py": code}
    return sorted((f.location.row, f.code) for f in project_findings(root, files, "train.py"))


def test_the_branches_a_cpu_default_skips_are_not_reported(tmp_path):
    assert codes(tmp_path, "-visible_gpus", "'-1'") == []


@pytest.mark.parametrize("option, default", [
    ("-visible_gpus", "'0'"),  # the default names GPU 0: CUDA already
    ("-dataset", "'-1'"),  # no device option: no request for CUDA
])
def test_other_options_keep_their_branches_reported(tmp_path, option, default):
    code = TRAIN.replace("visible_gpus", option.lstrip("-"))
    assert codes(tmp_path, option, default, code) == [(5, "TDV102"), (8, "TDV301"), (10, "TDV101")]


def test_an_option_the_file_sets_again_is_not_its_default(tmp_path):
    code = TRAIN.replace("    device =", "    args.visible_gpus = pick()\n    device =")
    assert [code for _, code in codes(tmp_path, "-visible_gpus", "'-1'", code)] == ["TDV102", "TDV301", "TDV101"]


def test_an_option_another_module_sets_is_not_its_default(tmp_path):
    files = {
        "opts.py": OPTIONS.format("-visible_gpus", "'-1'") + "args = parser.parse_args()\nargs.visible_gpus = os.environ['GPUS']\n",
        "train.py": TRAIN,
        "main.py": "from place import place\nplace(args.visible_gpus, x)\n",
        "place.py": PLACE,
    }
    assert [f.code for f in project_findings(tmp_path, files, "train.py")] == ["TDV102", "TDV301", "TDV101"]
    assert [f.code for f in project_findings(tmp_path, files, "place.py")] == ["TDV101"]


def test_a_name_bound_twice_is_not_followed(tmp_path):
    code = TRAIN.replace("    if device_id >= 0:", "    device_id = rank\n    if device_id >= 0:")
    assert codes(tmp_path, "-visible_gpus", "'-1'", code) == [(9, "TDV301")]


def test_a_parameter_is_not_followed(tmp_path):
    code = "import torch\n\n\ndef train(args, device_id):\n    if device_id >= 0:\n        torch.cuda.set_device(device_id)\n"
    assert codes(tmp_path, "-visible_gpus", "'-1'", code) == [(6, "TDV301")]


def test_a_file_checked_alone_keeps_todays_judgement(tmp_path):
    assert len(project_findings(tmp_path, {"train.py": TRAIN}, "train.py")) == 3


@pytest.mark.parametrize("option, default, off", [
    ("visible_gpus", "-1", True), ("gpu_ids", "", True), ("device", "cpu", True), ("gpu", -1, True),
    ("num_gpus", 0, True), ("gpu", None, True), ("gpu_ids", [], True),
    ("gpu_ids", "0", False), ("gpu", 0, False), ("device", "cuda", False), ("num_gpus", 2, False),
    ("device", "", False),  # YOLOv5's `--device ''`: the best device there is
])
def test_a_default_means_no_gpu_only_when_it_names_none(option, default, off):
    assert means_no_gpu(option, default) is off


def test_options_about_devices_name_them():
    assert [about_devices(name) for name in ("visible_gpus", "cuda_device", "device", "dataset", "local_rank")] == [
        True, True, True, False, False,
    ]



@pytest.mark.parametrize("default, found", [("'-1'", []), ("'0'", [(6, "TDV101")])])
def test_a_parameter_every_call_passes_the_option_has_its_default(tmp_path, default, found):
    files = {
        "opts.py": OPTIONS.format("-visible_gpus", default),
        "main.py": "from place import place\nplace(args.visible_gpus, x)\n",
        "place.py": PLACE,
    }
    assert sorted((f.location.row, f.code) for f in project_findings(tmp_path, files, "place.py")) == found
