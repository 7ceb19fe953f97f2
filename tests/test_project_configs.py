"""The device settings of a project's YAML configs, as the project model reads and keeps them."""

from pathlib import Path

from torchdevice_lint.project.configs import MAX_CONFIG_BYTES, config_defaults, config_options

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
