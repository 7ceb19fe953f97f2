"""How bench/realcode.py joins findings with the judged lists (synthetic checkout, no network)."""

from bench.realcode import Sources, findings_by_location, precision_table, recall_table


def finding(root, code, row, end_row=None):
    return {
        "code": code,
        "filename": str(root / "owner+proj" / "train.py"),
        "location": {"row": row, "column": 1},
        "end_location": {"row": end_row or row, "column": 9},
    }


def checkout(tmp_path):
    folder = tmp_path / "owner+proj"
    folder.mkdir()
    (folder / "train.py").write_text(
        "model.cuda()\n"
        "criterion = nn.CrossEntropyLoss().cuda()\n"
        "net = Net(\n"
        "    3,\n"
        ").cuda()\n"
        "state = torch.load(path)\n"
    )
    return tmp_path


def judged_finding(line, text, verdict, code="TDV101"):
    return {"repo": "owner/proj", "path": "train.py", "line": str(line), "code": code,
            "text": text, "verdict": verdict, "reason": "..."}


def test_precision_counts_judged_unjudged_stale_and_gone(tmp_path):
    root = checkout(tmp_path)
    located = findings_by_location([finding(root, "TDV101", 1), finding(root, "TDV101", 2),
                                    finding(root, "TDV101", 3, 5)], root)
    judged = [
        judged_finding(1, "model.cuda()", "true"),
        judged_finding(2, "criterion = nn.CrossEntropyLoss().cuda()", "false"),
        judged_finding(6, "state = torch.load(path)", "true", code="TDV501"),
        judged_finding(3, "net = Net(3).cuda()", "true"),
    ]

    table = {row[0]: row for row in precision_table(located, judged, Sources(root))}

    # rule, findings, judged, true, false, precision, unjudged, true gone, stale
    assert table["TDV101"] == ["TDV101", 3, 2, 1, 1, "0.50", 1, 0, 1]
    assert table["TDV501"] == ["TDV501", 0, 0, 0, 0, "n/a", 0, 1, 0]


def test_recall_counts_a_multiline_finding_on_every_line_it_spans(tmp_path):
    root = checkout(tmp_path)
    findings = [finding(root, "TDV101", 3, 5)]
    judged = [
        {"repo": "owner/proj", "path": "train.py", "line": "5", "text": ").cuda()", "verdict": "hazard",
         "kind": "cuda-method", "expected": "TDV101", "reason": "..."},
        {"repo": "owner/proj", "path": "train.py", "line": "6", "text": "state = torch.load(path)",
         "verdict": "hazard", "kind": "load", "expected": "TDV501", "reason": "..."},
    ]
    sources = Sources(root)

    start_only = {row[0]: row for row in recall_table(findings_by_location(findings, root), judged, sources)}
    spanned = {row[0]: row for row in recall_table(findings_by_location(findings, root, spanned=True),
                                                   judged, sources)}

    assert start_only["all"] == ["all", 2, 0, 0, "0.00"]
    assert spanned["all"] == ["all", 2, 1, 1, "0.50"]
    assert spanned["load"] == ["load", 1, 0, 0, "0.00"]
