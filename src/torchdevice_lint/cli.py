"""Command-line front ends: ``torchdevice-lint check|rule`` and ``torchdevice-fix``.

Exit codes: 0 clean, 1 findings (or, for ``--check``/``--diff``, something would change),
2 usage, configuration, read or parse errors, 130 interrupted (SIGINT).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import List, Optional, Sequence

from . import __version__
from .analysis.engine import Engine
from .analysis.findings import FileResult
from .analysis.registry import all_rules, rule_by_code
from .analysis.settings import ConfigError, Settings
from .app.cache import CACHE_DIR_NAME, ResultCache, default_cache_dir
from .app.config import load_settings, split_codes
from .app.docs import rule_page, write_rule_docs
from .app.output import FORMATS, FORMATS_WITH_EDITS, MACHINE_FORMATS, render, summary, wants_colour
from .app.parallel import check_paths
from .app.progress import Progress
from .app.runner import StopOnInterrupt, check_file, fix_file
from .app.sources import SourceError, SourceFile, decode, discover

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # the shell's code for SIGINT


def _selection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or directories ('-' reads stdin)")
    parser.add_argument("--select", help="comma-separated codes or prefixes to enable, e.g. TDV1,TDV501")
    parser.add_argument("--extend-select", help="codes or prefixes to enable on top of the selection (e.g. TDV9)")
    parser.add_argument("--ignore", help="codes or prefixes to disable")
    parser.add_argument("--exclude", help="comma-separated gitignore-style patterns replacing the default excludes")
    parser.add_argument("--extend-exclude", help="patterns excluded on top of the defaults")
    parser.add_argument("--config", help="pyproject.toml to read [tool.torchdevice-lint] from")
    parser.add_argument("--target-torch-version", help="oldest torch the fixed code must run on, e.g. 2.6")
    parser.add_argument("--stdin-filename", help="the name of the file read from stdin, for messages and per-file ignores")


def _settings(args: argparse.Namespace) -> Settings:
    # An editor passes the real path of the buffer it pipes in: its pyproject.toml applies.
    start = args.stdin_filename if args.paths == ["-"] and args.stdin_filename else next((p for p in args.paths if p != "-"), ".")
    settings = load_settings(start, args.config)
    overrides = {
        "select": split_codes(args.select),
        "ignore": split_codes(args.ignore),
        "exclude": split_codes(args.exclude),
        "target_torch_version": args.target_torch_version,
        "target_torch_source": "--target-torch-version" if args.target_torch_version else None,
    }
    settings = settings.with_overrides(**overrides)
    for name in ("extend_select", "extend_exclude"):
        extra = split_codes(getattr(args, name))
        if extra:
            settings = settings.with_overrides(**{name: tuple(getattr(settings, name)) + tuple(extra)})
    if getattr(args, "unsafe_fixes", None) is not None:
        settings = settings.with_overrides(unsafe_fixes=args.unsafe_fixes)
    settings.target_version()
    _check_codes(list(settings.select) + list(settings.extend_select) + list(settings.ignore))
    return settings


def _check_codes(prefixes: Sequence[str]) -> None:
    codes = [rule.code for rule in all_rules()]
    for prefix in prefixes:
        prefix = prefix.strip().upper()
        if prefix != "ALL" and not any(code.startswith(prefix) for code in codes):
            raise ConfigError(f"unknown rule code or prefix {prefix!r} (see `torchdevice-lint rule --all`)")


def _discover(paths: Sequence[str], settings: Settings):
    """The files to process and the errors for bad paths; notes (skipped links) go to stderr."""
    notes: List[str] = []
    found = discover(paths or ["."], settings, notes=notes)
    for note in notes:
        _error(note)
    return found


def _stdin_source(args: argparse.Namespace) -> Optional[SourceFile]:
    """The file read from stdin, or None (with the one-line error printed) if it cannot be decoded."""
    try:
        return decode(args.stdin_filename or "-", sys.stdin.buffer.read())
    except SourceError as error:
        _error(str(error))
        return None


def _error(message: str) -> None:
    print(message, file=sys.stderr)


# -- torchdevice-lint ---------------------------------------------------------------------------
def lint_main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="torchdevice-lint", description="Find device-portability hazards in PyTorch code.")
    parser.add_argument("--version", action="version", version=f"torchdevice-lint {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="report hazards")
    _selection_options(check)
    check.add_argument("--output-format", choices=sorted(FORMATS), default="full",
                       help="full (code frames), concise, json, github (Actions annotations), sarif, junit")
    check.add_argument("--jobs", "-j", type=int, default=0, metavar="N", help="processes to check files with (default: one per core)")
    check.add_argument("--no-cache", action="store_true", help="check every file again instead of reusing results of unchanged files")
    check.add_argument("--cache-dir", help=f"where results are kept between runs (default: {CACHE_DIR_NAME} in the project root)")
    rule = commands.add_parser("rule", help="explain a rule")
    rule.add_argument("code", nargs="?", help="a rule code such as TDV101")
    rule.add_argument("--all", action="store_true", help="print every rule's page")
    rule.add_argument("--write-docs", metavar="DIR", help="write every rule's page and an index as Markdown into DIR")
    args = parser.parse_args(argv)
    if args.command == "rule":
        return _rule_command(parser, args)
    try:
        return _check_command(args)
    except ConfigError as error:
        _error(f"torchdevice-lint: error: {error}")
        return EXIT_ERROR


def _rule_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.write_docs:
        written = write_rule_docs(args.write_docs)
        print(f"Wrote {len(written)} files to {args.write_docs}.", file=sys.stderr)
        return EXIT_CLEAN
    if args.all:
        print("\n".join(rule_page(rule) for rule in all_rules()), end="")
        return EXIT_CLEAN
    if not args.code:
        parser.error("rule: give a rule code or --all")
    try:
        print(rule_page(rule_by_code(args.code)), end="")
    except KeyError:
        _error(f"torchdevice-lint: error: unknown rule {args.code!r} (see `torchdevice-lint rule --all`)")
        return EXIT_ERROR
    return EXIT_CLEAN


def _check_command(args: argparse.Namespace) -> int:
    settings = _settings(args)
    engine = Engine(settings)
    with_edits = args.output_format in FORMATS_WITH_EDITS
    if args.paths == ["-"]:
        source = _stdin_source(args)
        if source is None:
            return EXIT_ERROR
        results = [check_file(engine, source.path, with_edits, source=source)]
        sources = {source.path: source.text}
        missing: List[str] = []
    else:
        files, missing = _discover(args.paths, settings)
        cache = None
        if not args.no_cache:
            cache = ResultCache(Path(args.cache_dir) if args.cache_dir else default_cache_dir(settings), settings, with_edits)
        progress = Progress(len(files), sys.stderr)
        try:
            results = check_paths(engine, files, with_edits, jobs=args.jobs, cache=cache, on_done=progress.advance)
        finally:
            progress.close()
        sources = _texts(results)
    return _report(results, sources, missing, args.output_format)


def _texts(results: Sequence[FileResult]) -> dict:
    """File texts for code frames, read only for files with findings."""
    texts = {}
    for result in results:
        if result.findings:
            try:
                with open(result.filename, encoding="utf-8", errors="replace", newline="") as handle:
                    texts[result.filename] = handle.read()
            except OSError:
                pass
    return texts


def _report(results: Sequence[FileResult], sources: dict, missing: Sequence[str], output_format: str) -> int:
    for message in missing:
        _error(message)
    errors = [r.error for r in results if r.error is not None]
    for error in errors:
        _error(str(error))
    sys.stdout.write(render(output_format, results, sources, colour=wants_colour(sys.stdout)))
    if output_format not in MACHINE_FORMATS:
        print(summary(results, colour=wants_colour(sys.stderr)), file=sys.stderr)
    if errors or missing:
        return EXIT_ERROR
    return EXIT_FINDINGS if any(r.findings for r in results) else EXIT_CLEAN


# -- torchdevice-fix ----------------------------------------------------------------------------
def fix_main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="torchdevice-fix", description="Rewrite device-portability hazards in PyTorch code.")
    parser.add_argument("--version", action="version", version=f"torchdevice-fix {__version__}")
    _selection_options(parser)
    parser.add_argument("--diff", action="store_true", help="print a unified diff and write nothing")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file would change")
    parser.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true", default=None,
                        help="also apply fixes that may change which device is used")
    parser.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false")
    args = parser.parse_args(argv)
    try:
        settings = _settings(args)
    except ConfigError as error:
        _error(f"torchdevice-fix: error: {error}")
        return EXIT_ERROR
    engine = Engine(settings)
    write = not (args.diff or args.check)
    if args.paths == ["-"]:
        source = _stdin_source(args)
        if source is None:
            return EXIT_ERROR
        result = fix_file(engine, source.path, settings.unsafe_fixes, write=False, source=source)
        if result.error:
            sys.stdout.write(source.text)
            _error(str(result.error))
            return EXIT_ERROR
        sys.stdout.write(result.diff() if args.diff else result.fixed)
        return _fix_exit([result], args, missing=())
    files, missing = _discover(args.paths, settings)
    for message in missing:
        _error(message)
    progress = Progress(len(files), sys.stderr, verb="Fixing")
    results = []
    try:
        with StopOnInterrupt() as stop:
            for path in files:
                if stop.requested:
                    break
                results.append(fix_file(engine, path, settings.unsafe_fixes, write))
                progress.advance(path)
        interrupted = stop.requested
    except KeyboardInterrupt:  # a second SIGINT stops inside a file; its write still completes
        interrupted = True
    progress.close()
    if interrupted:
        _error("torchdevice-fix: interrupted; every file is either unchanged or completely fixed")
        return EXIT_INTERRUPTED
    for result in results:
        if result.error:
            _error(str(result.error))
        elif args.diff and result.changed:
            sys.stdout.write(result.diff())
    remaining = [r.remaining for r in results if r.remaining is not None]
    if not args.diff:
        sys.stdout.write(FORMATS["concise"](remaining, {}))
    _error(_fix_summary(results, remaining, args, settings.unsafe_fixes))
    return _fix_exit(results, args, missing)


def _fix_exit(results, args: argparse.Namespace, missing: Sequence[str]) -> int:
    if missing or any(r.error for r in results):
        return EXIT_ERROR
    if args.diff or args.check:
        return EXIT_FINDINGS if any(r.changed for r in results) else EXIT_CLEAN
    return EXIT_FINDINGS if any(r.remaining and r.remaining.findings for r in results) else EXIT_CLEAN


def _fix_summary(results, remaining, args: argparse.Namespace, unsafe: bool) -> str:
    applied: Counter = Counter()
    for result in results:
        applied.update(result.applied)
    changed = sum(1 for r in results if r.changed)
    verb = "Would fix" if (args.diff or args.check) else "Fixed"
    total = sum(applied.values())
    if total:
        rules = ", ".join(f"{code} x{count}" for code, count in sorted(applied.items()))
        lines = [f"{verb} {total} finding{'s' if total != 1 else ''} in {changed} file{'s' if changed != 1 else ''} ({rules})."]
    else:
        lines = ["Nothing to fix."]
    left = [f for r in remaining for f in r.findings]
    if left:
        more = sum(1 for f in left if f.fix and f.fix.applicability == "unsafe")
        line = f"{len(left)} finding{'s remain' if len(left) != 1 else ' remains'}"
        if more and not unsafe:
            line += f" ({more} fixable with --unsafe-fixes)"
        lines.append(line + "; see `torchdevice-lint rule CODE` for how to fix the rest by hand.")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(lint_main())
