"""Properties of check and fix over generated programs.

``strategies.programs()`` builds PyTorch code full of hazards; hypothesmith builds arbitrary
valid Python, which almost never contains one, so its programs are also checked with every rule
and no first stage (every rule then visits the whole random tree) or are glued to a hazard program.

Profiles: the default ``ci`` keeps the whole module to a few tens of seconds;
``HYPOTHESIS_PROFILE=thorough`` runs many more examples.
"""

import os

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import programs
from test_dataflow import inference_events

from bench.reliability import replay_fix, stray_hunks
from torchdevice_lint import api
from torchdevice_lint.engine.batched import analyze_module
from torchdevice_lint.engine.fixer import UnreproducibleSource, fix_source
from torchdevice_lint.first_stage.facts import parse_facts
from torchdevice_lint.inference import infer_tree
from torchdevice_lint.knowledge.torch_releases import binding_expression
from torchdevice_lint.model.settings import Settings
from torchdevice_lint.rules import all_rules
from torchdevice_lint.syntax.ast_parse import Unparsable

settings.register_profile(
    "ci", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ENGINE = api.engine(Settings())
OPT_IN_ENGINE = api.engine(Settings(select=("ALL",), extend_select=("TDV9",)))
#: A comment naming the rules' vocabulary: only TDV900 reads comments, the first stage reads code.
TRIGGERS = "\n# cuda Tensor load amp set_default_ .numpy() device\n"
BINDING = f"{ENGINE.settings.device_name} = {binding_expression(ENGINE.settings)}"


def random_programs():
    """Valid Python from hypothesmith that CPython's parser (the engine's first stage) and
    LibCST both take."""
    return hypothesmith.from_grammar().filter(_parses)


def _parses(code: str) -> bool:
    try:
        parse_facts(code)
        cst.parse_module(code)
    except (Unparsable, cst.ParserSyntaxError, RecursionError):
        return False
    return True


def fixable(findings):
    return [f for f in findings if f.fix is not None and f.fix.applicability in ("safe", "unsafe")]


def assert_fix_properties(source: str, unsafe: bool) -> None:
    try:
        outcome, passes = replay_fix(ENGINE, "generated.py", source, unsafe)
    except UnreproducibleSource:
        assert cst.parse_module(source).code.rstrip("\r") != source.rstrip("\r")
        return  # refusing is right: LibCST itself would lose part of this file
    fixed = outcome.source
    if not outcome.applied:
        assert fixed == source
        return
    cst.parse_module(fixed)
    compile(fixed, "generated.py", "exec", dont_inherit=True)
    assert fix_source(ENGINE, "generated.py", fixed, unsafe=unsafe).source == fixed, "fix is not idempotent"
    for fix_pass in passes:
        assert stray_hunks(fix_pass, BINDING) == [], "fix changed lines it did not mean to"
    if unsafe:
        assert fixable(ENGINE.check_source("generated.py", fixed).findings) == []


@given(programs())
def test_unsafe_fix_is_idempotent_valid_local_and_complete(source):
    assert_fix_properties(source, unsafe=True)


@given(programs())
def test_safe_fix_is_idempotent_valid_and_local(source):
    assert_fix_properties(source, unsafe=False)


@given(programs())
def test_check_reports_generated_programs_without_errors(source):
    for engine in (ENGINE, OPT_IN_ENGINE):
        result = engine.check_source("generated.py", source, with_edits=True)
        assert result.error is None


@given(programs())
def test_the_inference_finds_the_same_when_it_skips_functions_without_seeds(source):
    facts = parse_facts(source)
    walking_all = infer_tree(facts.tree, source, facts.seeds, facts.dotted_calls, walk_every_function=True)
    assert inference_events(facts.inferred()) == inference_events(walking_all)


@given(random_programs())
def test_check_never_raises_on_random_programs(source):
    for engine in (ENGINE, OPT_IN_ENGINE):
        result = engine.check_source("random.py", source + TRIGGERS, with_edits=True)
        assert result.error is None or "nested too deeply" in result.error.message
    # the first stage rules most random programs out: every rule also walks the whole tree
    try:
        parse_facts(source)  # CPython takes it and it is not too deep for LibCST
        analyze_module("random.py", source, all_rules(), OPT_IN_ENGINE.settings)
    except Unparsable:
        pass  # grammar newer than LibCST's


@given(programs(), random_programs())
@settings(suppress_health_check=list(HealthCheck))
def test_fix_properties_hold_among_random_code(hazards, noise):
    source = hazards + "\n" + noise
    try:
        compile(source, "mixed.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        assume(False)  # e.g. a __future__ import in the random half
    assert_fix_properties(source, unsafe=True)


@pytest.mark.parametrize(
    "source",
    [
        "import torch\n" + "x = " + "(" * 40 + "x.cuda()" + ")" * 40 + "\n",
        "import torch\n" + "".join("    " * i + "if a:\n" for i in range(60)) + "    " * 60 + "x.cuda()\n",
        "import torch\nx = " + " + ".join(["y.cuda()"] * 300) + "\n",
    ],
    ids=["deep-parentheses", "deep-blocks", "long-expression"],
)
def test_deeply_nested_code_is_fixed_or_reported_without_raising(source):
    result = ENGINE.check_source("nested.py", source, with_edits=True)
    assert result.error is None or "nested too deeply" in result.error.message
    if result.error is None:
        assert_fix_properties(source, unsafe=True)


@given(st.text(alphabet="cuda().tofrm impt\n\r\t #'\"=:,[]01", max_size=120))
def test_check_never_raises_on_arbitrary_text(text):
    result = ENGINE.check_source("noise.py", "import torch\n" + text, with_edits=True)
    assert result.error is None or result.error.message
