"""The fixer's unified diffs: exactly difflib's on ordinary files, and a correct patch from the
anchored match that long files take."""

import difflib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchdevice_lint.syntax import diffs
from torchdevice_lint.syntax.diffs import unified_diff

HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@\n")

lines = st.lists(st.sampled_from(["import torch\n", "x = 1\n", "y = x.cuda()\n", "\n", "return y\n", "pass\n"]), max_size=30)


def patched(before, diff):
    """``before`` with the unified diff applied: what ``patch`` would write."""
    after, at = [], 0
    for line in diff[2:]:
        hunk = HUNK.fullmatch(line)
        if hunk:
            start = int(hunk[1]) - (1 if int(hunk[2] or 1) else 0)
            after.extend(before[at:start])
            at = start
        elif line[0] == " ":
            after.append(line[1:])
            at += 1
        elif line[0] == "-":
            at += 1
        else:
            after.append(line[1:])
    return after + before[at:]


@given(lines, lines)
def test_an_ordinary_file_gets_difflibs_diff(before, after):
    assert list(unified_diff(before, after, "a/f.py", "b/f.py")) == list(difflib.unified_diff(before, after, "a/f.py", "b/f.py"))


@settings(max_examples=300)
@given(lines, st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["", "z = 2\n", "y = x.to(device)\n"])), max_size=8))
def test_the_anchored_match_is_a_correct_patch(before, changes):
    after = list(before)
    for at, text in changes:  # an empty text deletes, any other replaces or appends
        if at < len(after):
            after[at:at + 1] = [text] if text else []
        elif text:
            after.append(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(diffs, "DIRECT_BUDGET", 0)  # every stretch through the anchors
        diff = list(unified_diff(before, after, "a/f.py", "b/f.py"))
    assert patched(before, diff) == after
    assert (diff == []) == (before == after)


def test_a_long_file_with_a_fix_on_every_other_line_gets_difflibs_diff():
    before = [line for i in range(1500) for line in (f"    h{i} = x.cuda() + {i}\n", f"    y = y + h{i}.sum()\n")]
    after = [line.replace(".cuda()", ".to(device)") for line in before]
    after.insert(0, "device = torch.device('cpu')\n")
    assert len(before) * len(after) > diffs.DIRECT_BUDGET  # matched through the anchors
    diff = list(unified_diff(before, after, "a/f.py", "b/f.py"))
    assert diff == list(difflib.unified_diff(before, after, "a/f.py", "b/f.py"))
