"""Which config keys a module reads off by default, and which it writes."""

import ast

from torchdevice_lint.project.facts import module_facts


def keys(source: str):
    facts = module_facts(ast.parse(source))
    return facts.read_keys, facts.written_keys


def test_a_get_without_default_reads_the_key():
    assert keys("if config.get('load'):\n    pass\n")[0] == ["load"]


def test_a_get_with_an_off_default_reads_it_too():
    assert keys("if cfg.get('resume', None) or cfg.get('pretrain', ''):\n    pass\n")[0] == ["pretrain", "resume"]


def test_a_get_with_a_default_that_turns_it_on_reads_nothing():
    assert keys("if cfg.get('augment', True):\n    pass\n")[0] == []


def test_the_environment_is_no_config():
    assert keys("import os\nif os.environ.get('RANK'):\n    pass\n")[0] == []


def test_a_membership_test_reads_the_key():
    assert keys("if 'base_weight' in self.args:\n    pass\n")[0] == ["base_weight"]


def test_a_key_the_module_writes_is_not_read_off():
    read, written = keys("config = dict(load=None)\nconfig['resume'] = 'x'\nif config.get('load') or config.get('resume'):\n    pass\n")
    assert read == []
    assert {"load", "resume"} <= set(written)


def test_module_level_names_are_a_python_config_s_keys():
    assert "load" in keys("load = 'runs/best.pth'\n")[1]
