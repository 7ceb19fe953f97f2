"""The engine's cheap walk and positions must equal LibCST's ``visit`` and ``PositionProvider``."""

import ast
import sys
from pathlib import Path

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from torchdevice_lint.syntax.cst_walk import TRIVIA_TYPES, nodes_of, walk
from torchdevice_lint.syntax.positions import node_positions, statement_first_lines, statement_positions

SAMPLE = (Path(__file__).parent / "data" / "hazards.py").read_text() + '''
@decorator(arg)  # comment
class Model(nn.Module, metaclass=Meta):
    """doc"""

    def forward(self, x: "Tensor", *args, y=1, **kwargs) -> Tensor:
        width = 4
        label = f"{x!r:>{width}} {y=}"
        with torch.no_grad(), open(p) as (a, b):
            for i in range(3):
                x = x[1:2, ..., None] @ x if i else -x
        try:
            pass
        except (ValueError, TypeError) as error:
            raise RuntimeError() from error
        finally:
            del x
        return lambda q, *r: {k: v for k, v in kwargs.items() if k} or [*args]

async def run():
    async for item in stream():
        await item
    match command:
        case [first, *rest] if first:
            pass
\r
x = 1 ;  y = 2  # trailing
'''


MATCH = """    match command:
        case [first, *rest] if first:
            pass
"""
assert MATCH in SAMPLE


class _Recorder(cst.CSTVisitor):
    def __init__(self):
        super().__init__()
        self.events = []

    def on_visit(self, node):
        self.events.append(("visit", id(node)))
        return True

    def on_leave(self, original_node):
        self.events.append(("leave", id(original_node)))


def test_walk_visits_what_visit_visits_in_the_same_order():
    module = cst.parse_module(SAMPLE)
    expected, walked = _Recorder(), _Recorder()
    module.visit(expected)
    walk(module, walked)
    assert walked.events == expected.events


def test_skipped_trivia_leaves_the_other_nodes_in_order():
    module = cst.parse_module(SAMPLE)
    everything, skipping = _Recorder(), _Recorder()
    walk(module, everything)
    walk(module, skipping, skip=TRIVIA_TYPES)
    inside_trivia = set()

    class _Trivia(cst.CSTVisitor):
        def on_visit(self, node):
            if type(node) in TRIVIA_TYPES:
                inside_trivia.update(id(n) for n in _subtree(node))
                return False
            return True

    module.visit(_Trivia())
    assert skipping.events == [e for e in everything.events if e[1] not in inside_trivia]


def _subtree(node):
    found = [node]
    for child in node.children:
        found.extend(_subtree(child))
    return found


def test_positions_of_chosen_statements_equal_position_provider():
    module = cst.parse_module(SAMPLE)
    reference = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    chosen = module.body[len(module.body) // 2::3]
    positions = statement_positions(module, chosen)
    expected_nodes = [n for statement in chosen for n in _subtree(statement)]
    assert expected_nodes and all(positions[n] == reference[n] for n in expected_nodes)
    assert all(positions[n] == reference[n] for n in positions)


def test_statements_placed_by_cpythons_tree_get_the_same_positions():
    # comments and blank lines before statements, decorators, a ``;`` line, a header comment
    sample = SAMPLE if sys.version_info >= (3, 10) else SAMPLE.replace(MATCH, "")  # CPython 3.9 has no match
    source = "# header\n\n" + sample + "\n# before\n\n@first\n# between\n@second\ndef f():\n    pass\na = 1; b = 2; c = 3\n"
    module = cst.parse_module(source)
    reference = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    first_lines = statement_first_lines(module, ast.parse(source))
    positions = statement_positions(module, module.body, first_lines)
    assert len(positions) > 1000 and all(positions[n] == reference[n] for n in positions)
    assert statement_first_lines(module, ast.parse("x = 1\n")) is None  # another file's tree


def test_nodes_reported_away_from_their_statement_still_get_positions():
    module = cst.parse_module(SAMPLE)
    reference = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    late = [n for n in _subtree(module.body[-3]) if isinstance(n, cst.Name)][-1]  # reported at leave_Module
    placed = [n for n in _subtree(module.body[1]) if isinstance(n, cst.Name)][0]
    positions = node_positions(module, [(late, (module,)), (placed, (module, module.body[1]))])
    assert positions[late] == reference[late] and positions[placed] == reference[placed]


NESTED = """class Outer:
    # a comment before the method

    @property
    # between decorators
    @cached
    def method(self, x):
        if x:  # header comment
            a = 1; b = x.cuda()
        elif x is None:
            \tpass
        elif not x:
            if y: z = 1; w = 2
            else:
              deep = torch.load(p)
            # the block's footer comment
        else:
            for i in range(3):
                continue
            else:
                while False:
                    break
                else:
                    pass
        try:
            with open(p) as f:
                data = f.read()
        except ValueError:
            raise
        except (KeyError,
                TypeError) as error:
            print(error)
        else:
            x = [
                1,
                2,
            ]
        finally:
            del x
        return (lambda: x)()

def tail():
    return 1
"""


class _Ancestry(cst.CSTVisitor):
    def __init__(self):
        super().__init__()
        self.stack, self.chains = [], []

    def on_visit(self, node):
        self.stack.append(node)
        self.chains.append((node, tuple(self.stack)))
        return True

    def on_leave(self, original_node):
        self.stack.pop()


def test_nodes_placed_by_their_innermost_statement_get_position_providers_ranges():
    # elif chains, else arms, try handlers, one-line suites, a tab-indented block, comments
    for source in (NESTED, SAMPLE if sys.version_info >= (3, 10) else SAMPLE.replace(MATCH, "")):
        module = cst.parse_module(source)
        reference = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        ancestry = _Ancestry()
        module.visit(ancestry)
        chains = [(node, chain) for node, chain in ancestry.chains if node is not module]
        for ordered in (chains, chains[::-1]):  # inner statements first, and outer ones first
            positions = node_positions(module, ordered, ast.parse(source))
            assert all(positions[node] == reference[node] for node, _ in ordered)
        one = node_positions(module, [chains[len(chains) // 2]], ast.parse(source))
        assert len(one) < len(chains) // 4  # a statement, not the file


def test_nodes_of_finds_what_matchers_findall_finds_in_the_same_order():
    module = cst.parse_module(SAMPLE)
    for node_type in (cst.Call, cst.Assign, cst.Name, cst.Comma, cst.IfExp):
        found = nodes_of(module, node_type)
        expected = m.findall(module, getattr(m, node_type.__name__)())
        assert found and len(found) == len(expected)
        assert all(a is b for a, b in zip(found, expected))
