"""The device settings of a project's YAML configs, and whether its docs name a distributed
launcher, as the project model reads and keeps them."""

from pathlib import Path

from torchdevice_lint.project.configs import MAX_CONFIG_BYTES, config_defaults, config_options, names_launcher, plain_runs

from tests.test_project_model import codes, stored_projects

TRAIN = "import torch\nimport yaml\n\nconfig = yaml.safe_load(open('config.yaml'))\nif config['cuda']:\n    x = torch.zeros(3).cuda()\n"


def scripts(folder: Path, config: str) -> Path:
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    (folder / "config.yaml").write_text(config)
    return folder / "train.py"


def test_device_settings_are_read_at_any_depth_and_other_keys_are_not():
    text = b"cuda: true\nmodel:\n  gpu_ids: [0, 1]\n  layers: 3\ntrainer:\n  device: cpu\nlr: 0.1\n"
    assert config_options(text) == {"cuda": True, "gpu_ids": [0, 1], "device": "cpu"}


def test_a_key_one_file_gives_two_values_is_unknown():
    assert config_options(b"train:\n  device: cuda\ntest:\n  device: cpu\nuse_gpu: true\n") == {"use_gpu": True}


def test_what_is_not_yaml_or_too_large_says_nothing():
    assert config_options(b"cuda: [unclosed\n") == {}
    assert config_options(b"- cuda\n- true\n") == {}
    assert config_options(b"cuda: true\n" + b"#" * MAX_CONFIG_BYTES) == {}


def test_configs_that_disagree_and_names_a_module_defines_stay_unknown():
    configs = [{"cuda": True, "device": "cuda:0"}, {"cuda": False}, {"gpu_ids": [0]}]
    assert config_defaults(configs, ["gpu_ids"]) == {"device": "cuda:0"}


def test_a_config_read_back_from_the_cache_decides_like_a_parsed_one(tmp_path):
    train = scripts(tmp_path / "tree", "cuda: true\n")
    assert stored_projects(tmp_path / "tree", tmp_path / "cache").cache.parsed == 2
    again = stored_projects(tmp_path / "tree", tmp_path / "cache")
    assert again.cache.parsed == 0
    assert codes(train, again) == ["TDV101"]


def test_a_changed_config_changes_the_findings(tmp_path):
    train = scripts(tmp_path / "tree", "cuda: true\n")
    assert codes(train, stored_projects(tmp_path / "tree", tmp_path / "cache")) == ["TDV101"]
    (tmp_path / "tree" / "config.yaml").write_text("cuda: false\n")
    again = stored_projects(tmp_path / "tree", tmp_path / "cache")
    assert again.cache.parsed == 1
    assert codes(train, again) == []


RANKED = (
    "import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\n"
    "parser.add_argument('--local_rank', type=int, default=-1)\nargs = parser.parse_args()\n"
    "if args.local_rank != -1:\n    torch.cuda.set_device(args.local_rank)\n"
)


def test_launchers_are_named_by_their_commands_not_by_the_option():
    assert names_launcher(b"python -m torch.distributed.launch --nproc_per_node=4 train.py")
    assert names_launcher(b"TORCHRUN --nproc-per-node 8 train.py")
    assert names_launcher(b"deepspeed train.py --deepspeed_config ds.json")
    assert names_launcher(b"python train.py --local_rank=0")
    assert not names_launcher(b"parser.add_argument('--local_rank', type=int, default=-1)")
    assert not names_launcher(b"python3 code/run_tacred.py --do_train")


def test_a_readme_that_starts_a_launcher_changes_the_findings(tmp_path):
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "train.py").write_text(RANKED)
    (folder / "README.md").write_text("python train.py\n")
    assert codes(folder / "train.py", stored_projects(folder, tmp_path / "cache")) == []
    (folder / "README.md").write_text("torchrun --nproc_per_node=2 train.py\n")
    assert codes(folder / "train.py", stored_projects(folder, tmp_path / "cache")) == ["TDV301"]


def test_a_script_the_readme_also_runs_plainly_keeps_the_default_rank(tmp_path):
    """WongKinYiu/yolov7@a207844 README.md: ``python train.py --device 0`` for one GPU, and
    ``torch.distributed.launch`` for several; a machine without a GPU makes the plain run."""
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "train.py").write_text(RANKED)
    (folder / "README.md").write_text(
        "python train.py --device 0\n\npython -m torch.distributed.launch --nproc_per_node 4 \\\n    train.py --device 0,1,2,3\n"
    )
    assert codes(folder / "train.py", stored_projects(folder, tmp_path / "cache")) == []
    (folder / "README.md").write_text("python -m torch.distributed.launch --nproc_per_node 4 \\\n    train.py\npython test.py\n")
    assert codes(folder / "train.py", stored_projects(folder, tmp_path / "cache")) == ["TDV301"]


def test_plain_runs_are_commands_without_a_launcher():
    assert plain_runs(b"$ python3 -u tools/train.py --cfg a.yaml\nCUDA_VISIBLE_DEVICES=0 python ./eval.py\n") == {"tools/train.py", "eval.py"}
    assert plain_runs(b"python -m torch.distributed.launch --nproc_per_node=2 train.py\n") == set()
    assert plain_runs(b"torchrun --nproc_per_node 2 \\\n  python train.py\n") == set()  # one command, continued
    assert plain_runs(b"python train.py --local_rank=0\n") == set()
    assert plain_runs(b"see train.py; written in python\n") == set()


def test_a_readme_in_plain_text_is_a_readme(tmp_path):
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "train.py").write_text(RANKED)
    (folder / "README.txt").write_text("torchrun --nproc_per_node=2 train.py\n")
    assert codes(folder / "train.py", stored_projects(folder, tmp_path / "cache")) == ["TDV301"]


def test_a_launcher_named_in_a_shell_script_or_a_module_counts(tmp_path):
    for name, text in (("scripts/dist.sh", "python -m torch.distributed.launch train.py\n"),
                       ("launch.py", "import subprocess\nsubprocess.run(['torchrun', 'train.py'])\n")):
        folder = tmp_path / name.replace("/", "_")
        (folder / name).parent.mkdir(parents=True)
        (folder / "train.py").write_text(RANKED)
        (folder / name).write_text(text)
        assert codes(folder / "train.py", stored_projects(folder, tmp_path / "cache")) == ["TDV301"]


def test_a_launcher_in_a_part_with_its_own_readme_starts_that_part_only(tmp_path):
    """salesforce/CodeT5: CodeT5+/README.md runs ``deepspeed``; CodeT5/ runs plain python."""
    folder = tmp_path / "tree"
    for part, readme in (("plain", "python run.py\n"), ("plus", "deepspeed run.py\n")):
        (folder / part).mkdir(parents=True)
        (folder / part / "README.md").write_text(readme)
        (folder / part / "run.py").write_text(RANKED)
    projects = stored_projects(folder, tmp_path / "cache")
    assert codes(folder / "plain" / "run.py", projects) == []
    assert codes(folder / "plus" / "run.py", projects) == ["TDV301"]
