"""An option off by default that nothing documented turns on gates code off the program's run
(``project/configs.PassedOptions``): a README that runs the script without ``--resume`` leaves the
resume's load unreported; a document that passes it, a config key, a module that sets it or
hands it to a command, and a project that documents no run at all keep it reported."""

import pytest

from torchdevice_lint.model.settings import Settings
from torchdevice_lint.project.configs import flags_passed
from tests.project_files import project_findings

#: The default settings: code off the documented run is left out (``check-unreached`` checks it).
DEFAULT = Settings()

#: edenton/svg@3f19f0b train_svg_lp.py:19,47,49
TRAIN = (
    "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--resume', default='')\n"
    "parser.add_argument('--lr', type=float, default=0.1)\nargs = parser.parse_args()\n"
    "if args.resume:\n    state = torch.load(args.resume)\n"
)
README = {"README.md": "Train with `python train.py --lr 0.01`.\n"}


def codes(root, files):
    return [finding.code for finding in project_findings(root, {"train.py": TRAIN, **files}, "train.py", DEFAULT)]


def test_the_flags_a_command_passes_and_their_values():
    text = b"python train.py --do_train --do_test --eval 0 --gpu -1 --lr=0.1 -pretrained --load-dir $CKPT; pre-trained"
    assert flags_passed(text) == {
        "do_train": {None}, "do_test": {None}, "eval": {"0"}, "gpu": {"-1"}, "lr": {"0.1"}, "pretrained": {None}, "load_dir": {"$CKPT"},
    }


def test_a_resume_no_document_asks_for_is_off_the_run(tmp_path):
    assert codes(tmp_path, README) == []


def test_a_document_that_passes_the_default_leaves_it_off(tmp_path):
    """eriklindernoren/PyTorch-GAN@36d3c77 implementations/cyclegan/cyclegan.py:25,73-78: ``--epoch``
    (0 by default) resumes from a later epoch's checkpoint."""
    code = TRAIN.replace("'--resume', default=''", "'--epoch', type=int, default=0").replace("if args.resume:", "if args.epoch != 0:")
    files = {"train.py": code, "run.sh": "python train.py --epoch 0 --lr 0.1\n"}
    assert [finding.code for finding in project_findings(tmp_path, files, "train.py", DEFAULT)] == []
    files["resume.sh"] = "python train.py --epoch 50\n"
    assert [finding.code for finding in project_findings(tmp_path, files, "train.py", DEFAULT)] == ["TDV501"]


@pytest.mark.parametrize("files", [
    {},  # no document says how the project runs
    {**README, "resume.sh": "python train.py --resume runs/last.pt\n"},
    {**README, "train.yaml": "resume: runs/last.pt\n"},
    {**README, "resume.sh": "python train.py --resume ''\n"},  # a value the reader cannot tell from the flag
    {**README, "launch.py": "import subprocess\nsubprocess.run(['python', 'train.py', '--resume', 'last.pt'])\n"},
    {**README, "setup_args.py": "def setup(args):\n    args.resume = 'last.pt'\n"},
    {**README, "config.py": "def merge(args, config):\n    vars(args).update(config)\n"},
], ids=["undocumented", "a script passes it", "a config key", "an empty value", "a module's command", "a module sets it", "set by a computed name"])
def test_a_resume_something_may_turn_on_stays_reported(tmp_path, files):
    assert codes(tmp_path, files) == ["TDV501"]


def test_a_choice_among_values_is_no_feature_turned_off(tmp_path):
    """``--loss Proxy_Anchor`` by default: the other losses are the user's to choose
    (tjddus9597/Proxy-Anchor-CVPR2020@51db570 code/train.py:222-233)."""
    code = (
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--loss', default='Proxy_Anchor')\nargs = parser.parse_args()\n"
        "if args.loss == 'Proxy_NCA':\n    criterion = Proxy_NCA().cuda()\n"
    )
    findings = project_findings(tmp_path, {"train.py": code, **README}, "train.py", DEFAULT)
    assert [finding.code for finding in findings] == ["TDV101"]


def test_check_unreached_reports_what_no_document_turns_on(tmp_path):
    files = {"train.py": TRAIN, **README}
    assert [f.code for f in project_findings(tmp_path, files, "train.py", DEFAULT)] == []
    assert [f.code for f in project_findings(tmp_path, files, "train.py", Settings(check_unreached=True))] == ["TDV501"]
