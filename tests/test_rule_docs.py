"""docs/rules is generated from the rule classes; this fails when a rule changed and the
committed pages were not regenerated (`torchdevice-lint rule --write-docs docs/rules`)."""

from pathlib import Path

from torchdevice_lint.app.docs import rule_docs, write_rule_docs
from torchdevice_lint.rules import all_rules

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rules"


def test_committed_rule_docs_are_up_to_date():
    expected = rule_docs()
    committed = {path.name: path.read_text(encoding="utf-8") for path in DOCS.glob("*.md")}
    stale = sorted(name for name in expected.keys() | committed.keys() if expected.get(name) != committed.get(name))
    assert not stale, f"regenerate with `torchdevice-lint rule --write-docs docs/rules`: {stale}"


def test_index_links_every_rule_and_marks_opt_in_ones():
    index = rule_docs()["index.md"]
    for rule in all_rules():
        assert f"[{rule.code}]({rule.code}.md)" in index
    assert "| [TDV901](TDV901.md) | cuda-api-with-accelerator-equivalent | opt-in |" in index


def test_write_rule_docs_removes_pages_of_rules_that_are_gone(tmp_path):
    (tmp_path / "TDV999.md").write_text("old")
    write_rule_docs(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(rule_docs())
