"""A script that reads an option its parser never defines fails on every machine at that line:
what would run after it, and what only that calls, raises nothing because CUDA is missing
(``knowledge/script_options.py``)."""

import ast
from pathlib import Path

from torchdevice_lint.model.settings import Settings
from torchdevice_lint.knowledge.script_options import failing_statements
from tests.project_files import project_findings

PARSER = "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--lr', type=float, default=0.1)\n"


def lines(code: str):
    return [tuple(entry[:2]) for entry in failing_statements(ast.parse(code))]


def test_the_first_read_of_an_undefined_option_is_found():
    code = PARSER + "args = parser.parse_args()\nlr = args.lr\nbins = args.bins\nmodel = torch.nn.Linear(2, 2).cuda()\n"
    assert lines(code) == [(7, 7)]


def test_a_namespace_built_by_a_function_of_the_module_and_read_in_the_main_block():
    code = (
        "import argparse\n\n\ndef parse_args():\n    parser = argparse.ArgumentParser()\n    parser.add_argument('--arch')\n"
        "    return parser.parse_args()\n\n\nif __name__ == '__main__':\n    args = parse_args()\n    bins = args.bins\n    print(bins)\n"
    )
    assert failing_statements(ast.parse(code)) == [[12, 12, 13, ["bins"]]]


def test_options_the_parser_defines_or_the_module_sets_do_not_fail():
    code = PARSER + "parser.set_defaults(seed=1)\nargs = parser.parse_args()\nargs.task = 'x'\nprint(args.lr, args.seed, args.task)\n"
    code += "print(sorted(args._get_kwargs()))\n"  # a method of the namespace
    assert lines(code) == []


def test_a_parser_that_may_hold_more_options_is_left_alone():
    for extra in ("sub = parser.add_subparsers()\n", "setattr(args, name, 1)\n", "vars(args).update(config)\n", "args.__dict__['k'] = 1\n"):
        code = PARSER + "args = parser.parse_args()\n" + extra + "bins = args.bins\n"
        assert lines(code) == [], extra


def test_a_parser_handed_to_another_module_may_get_its_options_there():
    # GuoLanqing/ShadowFormer@f721581 train.py:12 ``options.Options().init(argparse.ArgumentParser())``
    handed_on = "import argparse\nimport options\nopt = options.Options().init(argparse.ArgumentParser()).parse_args()\ngpu = opt.gpu\n"
    assert lines(handed_on) == []
    named = PARSER + "options.add_training_args(parser)\nargs = parser.parse_args()\nbins = args.bins\n"
    assert lines(named) == []


def test_a_namespace_handed_to_a_method_before_the_read_is_left_alone():
    assert lines(PARSER + "args = parser.parse_args()\nconfig.merge(args)\nbins = args.bins\n") == []
    assert lines(PARSER + "args = parser.parse_args()\nprint(args)\nbins = args.bins\n") == [(7, 7)]


def test_a_read_in_a_branch_may_not_run():
    assert lines(PARSER + "args = parser.parse_args()\nif args.lr > 1:\n    bins = args.bins\n") == []
    assert lines(PARSER + "args = parser.parse_args()\nif args.bins > 1:\n    pass\n") == [(6, 7)]


def test_what_would_run_after_the_failing_line_is_not_reported(tmp_path: Path):
    script = PARSER + "args = parser.parse_args()\nbins = args.bins\nmodel = torch.nn.Linear(2, 2).cuda()\n"
    assert project_findings(tmp_path, {"main.py": script}, "main.py", Settings()) == []
    # another module sets the option: the line does not fail
    (tmp_path / "set").mkdir()
    findings = project_findings(tmp_path / "set", {"main.py": script, "utils.py": "def setup(args):\n    args.bins = 3\n"}, "main.py", Settings())
    assert [f.code for f in findings] == ["TDV101"]
