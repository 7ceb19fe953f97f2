"""Command-line front ends: ``torchdevice-lint check|rule`` and ``torchdevice-fix``.

Exit codes: 0 clean, 1 findings (or, for ``--check``/``--diff``, something would change),
2 usage, configuration, read or parse errors, 130 interrupted (SIGINT).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import traceback
from dataclasses import replace
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from . import __version__
from .project import baseline as baselines
from .app.add_noqa import add_noqa
from .app.cache import CACHE_DIR_NAME, ResultCache, default_cache_dir, stored_projects
from .app.config import SettingsResolver, check_codes, find_project_root, find_pyproject, split_codes
from .app.discovery import Discovery, discover
from .app.docs import rule_page, write_rule_docs
from .app.output import (
    FORMATS,
    FORMATS_WITH_EDITS,
    fix_summary,
    MACHINE_FORMATS,
    printable,
    render,
    settings_text,
    sorted_results,
    statistics,
    summary,
    wants_colour,
)
from .app.parallel import check_paths, fix_paths
from .app.progress import Progress
from .project.roots import declared_root
from .app.runner import StopOnInterrupt, check_file, fix_file
from .app.sources import SourceError, SourceFile, decode, read_source
from .app.watch import pyprojects_above, watch
from .engine.engine import Engine
from .model.findings import FileResult
from .model.settings import ConfigError, Settings
from .project.model import Projects
from .rules import all_rules, rule_by_code

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # the shell's code for SIGINT


def _selection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or directories ('-' reads stdin)")
    parser.add_argument("--select", help="comma-separated codes or prefixes to enable, e.g. TDV1,TDV501")
    parser.add_argument("--extend-select", help="codes or prefixes to enable on top of the selection (e.g. TDV9)")
    parser.add_argument("--ignore", help="codes or prefixes to disable")
    parser.add_argument("--exclude", help="comma-separated gitignore patterns replacing the default excludes")
    parser.add_argument("--extend-exclude", help="patterns excluded on top of the defaults")
    parser.add_argument("--force-exclude", dest="force_exclude", action="store_true", default=None,
                        help="apply the excludes and ignore files to files named on the command line too (pre-commit)")
    parser.add_argument("--no-force-exclude", dest="force_exclude", action="store_false")
    parser.add_argument("--respect-gitignore", dest="respect_gitignore", action="store_true", default=None,
                        help="skip files that .gitignore/.ignore files ignore (the default)")
    parser.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false")
    parser.add_argument("--config", help="pyproject.toml to read [tool.torchdevice-lint] from, for every file")
    parser.add_argument("--target-torch-version", help="oldest torch the fixed code must run on, e.g. 2.6")
    parser.add_argument("--stdin-filename", help="the name of the file read from stdin, for messages and per-file ignores")
    parser.add_argument("--jobs", "-j", type=int, default=0, metavar="N", help="processes to use (default: one per core)")
    parser.add_argument("--no-cache", action="store_true", help="analyse every file again instead of reusing results of unchanged files")
    parser.add_argument("--cache-dir", help=f"where results are kept between runs (default: {CACHE_DIR_NAME} in the project root)")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are reported (errors still exit 2)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print findings and errors only: no summary, no progress")
    parser.add_argument("--show-settings", action="store_true", help="print the settings the first file is checked with, and exit")
    parser.add_argument("--show-files", action="store_true", help="print the files that would be checked, and exit")
    parser.add_argument("--baseline", metavar="FILE", help="report only findings not in FILE (default: the configured `baseline`)")
    parser.add_argument("--no-baseline", action="store_true", help="report every finding, even with a baseline configured")


def _fix_options(parser: argparse.ArgumentParser) -> None:
    """The fixing flags ``torchdevice-fix`` and ``check --fix`` share (ruff's names)."""
    parser.add_argument("--diff", action="store_true", help="print a unified diff of the fixes and write nothing (exit 1 if a file would change)")
    parser.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true", default=None,
                        help="also apply fixes that may change which device is used")
    parser.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false")


def _resolver(args: argparse.Namespace) -> Tuple[SettingsResolver, Settings]:
    """The settings of each file (hierarchical, the command line on top) and those of the run
    as a whole (the first path's: discovery options, as in ruff)."""
    check_codes([code for name in ("select", "extend_select", "ignore") for code in split_codes(getattr(args, name)) or ()])
    if args.target_torch_version:
        Settings(target_torch_version=args.target_torch_version).target_version()

    def overrides(settings: Settings) -> Settings:
        settings = settings.with_overrides(
            select=split_codes(args.select),
            ignore=split_codes(args.ignore),
            exclude=split_codes(args.exclude),
            target_torch_version=args.target_torch_version,
            target_torch_source="--target-torch-version" if args.target_torch_version else None,
            unsafe_fixes=getattr(args, "unsafe_fixes", None),
            force_exclude=args.force_exclude,
            respect_gitignore=args.respect_gitignore,
        )
        for name in ("extend_select", "extend_exclude"):
            extra = split_codes(getattr(args, name))
            if extra:
                settings = settings.with_overrides(**{name: tuple(getattr(settings, name)) + tuple(extra)})
        return settings

    resolver = SettingsResolver(args.config, overrides)
    # An editor passes the real path of the buffer it pipes in: its pyproject.toml applies.
    start = args.stdin_filename if args.paths == ["-"] and args.stdin_filename else next((p for p in args.paths if p != "-"), ".")
    return resolver, resolver(start)


def _discover(args: argparse.Namespace, resolver: SettingsResolver, run: Settings):
    """The files to process and the errors for bad paths; notes (skipped links) go to stderr."""
    notes: List[str] = []
    found = discover(args.paths or ["."], resolver, notes=notes, respect_gitignore=run.respect_gitignore,
                     force_exclude=run.force_exclude)
    if not args.quiet:
        for note in notes:
            _error(note)
    return found


def _cache(args: argparse.Namespace, settings: Settings, with_edits: bool) -> Optional[ResultCache]:
    if args.no_cache:
        return None
    if args.cache_dir or settings.cache_dir:  # the command line's, else the configuration's (ruff's order)
        directory = Path(args.cache_dir) if args.cache_dir else Path(settings.root) / settings.cache_dir
    else:
        directory = default_cache_dir(settings, find_project_root(settings.root))
    # Neither unsafe fixes nor where and how results are shown change a finding: one cache file.
    return ResultCache(directory, replace(settings, unsafe_fixes=False, output_format=None, cache_dir=None), with_edits)


def _stdin_excluded(args: argparse.Namespace, resolver: SettingsResolver, run: Settings) -> bool:
    """``--force-exclude`` with ``--stdin-filename`` naming an excluded file (ruff's reading)."""
    return bool(run.force_exclude and args.stdin_filename
                and Discovery(resolver, run.respect_gitignore).forced_out(args.stdin_filename))


def _show(args: argparse.Namespace, resolver: SettingsResolver, run: Settings) -> Optional[int]:
    """``--show-settings``/``--show-files``: print and return the exit code; None otherwise."""
    if not (args.show_settings or args.show_files):
        return None
    files, missing = _discover(args, resolver, run)
    for message in missing:
        _error(message)
    if args.show_settings:
        target = files[0] if files else (args.stdin_filename or next(iter(args.paths), "."))
        config = Path(args.config) if args.config else find_pyproject(target)
        root = declared_root(target)
        print(settings_text(target, str(config) if config else None, resolver(target), str(root) if root else None,
                            resolver.target_origin(target)), end="")
    else:
        print("".join(f"{os.path.abspath(path)}\n" for path in sorted(files, key=os.path.abspath)), end="")
    return EXIT_ERROR if missing else EXIT_CLEAN


def _stdin_source(args: argparse.Namespace) -> Optional[SourceFile]:
    """The file read from stdin, or None (with the one-line error printed) if it cannot be decoded."""
    try:
        return decode(args.stdin_filename or "-", sys.stdin.buffer.read())
    except SourceError as error:
        _error(str(error))
        return None


def _error(message: str) -> None:
    """One line on stderr, whatever a file name or message holds (control characters escaped)."""
    print(printable(message), file=sys.stderr)


def _internal_errors_exit_2(main):
    """A crash of the tool itself exits 2 (an error), never 1, which means "findings"."""

    @functools.wraps(main)
    def guarded(argv: Optional[List[str]] = None) -> int:
        try:
            return main(argv)
        except Exception as error:  # noqa: BLE001 - the last line of defence
            traceback.print_exc()
            _error(f"torchdevice-{main.__name__.split('_')[0]}: internal error ({error.__class__.__name__}); please report this as a bug")
            return EXIT_ERROR

    return guarded


# -- torchdevice-lint ---------------------------------------------------------------------------
@_internal_errors_exit_2
def lint_main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="torchdevice-lint", description="Find device-portability hazards in PyTorch code.")
    parser.add_argument("--version", action="version", version=f"torchdevice-lint {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="report hazards")
    _selection_options(check)
    check.add_argument("--output-format", choices=sorted(FORMATS),
                       help="full (code frames; the default unless output-format is configured), concise, json, json-lines, github (Actions annotations), "
                            "gitlab (Code Quality), sarif, rdjson (reviewdog), junit")
    check.add_argument("--output-file", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    check.add_argument("--statistics", action="store_true", help="print the number of findings per rule instead of the findings")
    check.add_argument("--add-noqa", action="store_true", help="add `# noqa: CODE` to every line with a finding")
    check.add_argument("--write-baseline", metavar="FILE", help="write every finding to FILE as the baseline, and exit")
    check.add_argument("--fix", action="store_true", help="apply the fixes torchdevice-fix applies, then report what remains")
    _fix_options(check)
    check.add_argument("--watch", "-w", action="store_true", help="check again whenever a checked file or a pyproject.toml changes (Ctrl-C stops)")
    check.set_defaults(check=False)  # torchdevice-fix's --check: never set by `check --fix`
    rule = commands.add_parser("rule", help="explain a rule")
    rule.add_argument("code", nargs="?", help="a rule code such as TDV101")
    rule.add_argument("--all", action="store_true", help="print every rule's page")
    rule.add_argument("--write-docs", metavar="DIR", help="write every rule's page and an index as Markdown into DIR")
    commands.add_parser("server", help="run the language server over stdio (needs the lsp extra)")
    args = parser.parse_args(argv)
    if args.command == "rule":
        return _rule_command(parser, args)
    if args.command == "server":
        return _server_command()
    if (args.fix or args.diff) and (args.add_noqa or args.statistics):
        parser.error("--fix and --diff cannot be combined with --add-noqa or --statistics")
    if args.diff and args.output_file:
        parser.error("--diff prints the diff to stdout; it cannot be combined with --output-file")
    if args.watch and "-" in args.paths:
        parser.error("--watch watches files; it cannot read stdin")
    if args.watch:
        return watch(lambda: _checked(argparse.Namespace(**vars(args))), lambda: _watched_files(args), _error)
    return _checked(args)


def _checked(args: argparse.Namespace) -> int:
    try:
        return _check_command(args)
    except ConfigError as error:
        _error(f"torchdevice-lint: error: {error}")
        return EXIT_ERROR


def _watched_files(args: argparse.Namespace) -> List[str]:
    """What ``--watch`` watches: the files a check takes and the pyproject.toml of each; with a
    broken configuration, every pyproject.toml above the paths given (to see it mended)."""
    try:
        resolver, run = _resolver(args)
        files, _ = discover(args.paths or ["."], resolver, notes=[], respect_gitignore=run.respect_gitignore,
                            force_exclude=run.force_exclude)
    except ConfigError:
        return pyprojects_above(args.paths or ["."])
    configs = {args.config} if args.config else {os.path.join(resolver(path).root, "pyproject.toml") for path in files}
    return sorted(set(files) | configs)


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


def _server_command() -> int:
    try:
        from .server import serve  # pygls is imported only when the server starts
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        _error("torchdevice-lint: error: the language server needs pygls: pip install 'torchdevice-lint[lsp]'")
        return EXIT_ERROR
    return serve()


def _check_command(args: argparse.Namespace) -> int:
    resolver, run = _resolver(args)
    shown = _show(args, resolver, run)
    if shown is not None:
        return shown
    args.output_format = args.output_format or run.output_format or "full"
    if args.fix or args.diff:
        return _fix_run(args, resolver, run)
    with_edits = args.output_format in FORMATS_WITH_EDITS and not args.statistics
    baseline = None if args.write_baseline or args.add_noqa else baselines.configured(run, args.baseline, args.no_baseline)
    missing: List[str] = []
    if args.paths == ["-"]:
        source = _stdin_source(args)
        if source is None:
            return EXIT_ERROR
        results = [] if _stdin_excluded(args, resolver, run) else [
            check_file(Engine(run, all_rules(), _buffer_projects(source)), source.path, with_edits, source=source)
        ]
        targets = ""
    else:
        files, missing = _discover(args, resolver, run)
        progress = Progress(0 if args.quiet else len(files), sys.stderr)
        results = []
        groups = [(settings, group, _cache(args, settings, with_edits)) for settings, group in resolver.groups(files)]
        try:
            with stored_projects(_model_cache(groups), files, args.paths) as projects:
                for settings, group, cache in groups:
                    results.extend(check_paths(Engine(settings, all_rules(), projects), group, with_edits, jobs=args.jobs,
                                               cache=cache, on_done=progress.advance))
        finally:
            progress.close()
        targets = resolver.targets_note(files)
    if args.add_noqa:
        return _add_noqa_command(results, missing)
    if args.write_baseline:
        return _write_baseline_command(args.write_baseline, results, missing)
    results, filtered = baselines.apply(baseline, results)
    sources = source.texts_by_frame() if args.paths == ["-"] else _texts(results)
    return _report(results, sources, missing, args, filtered, targets)


def _add_noqa_command(results: Sequence[FileResult], missing: Sequence[str]) -> int:
    added, problems = add_noqa([r for r in results if r.error is None])
    for message in list(missing) + [str(r.error) for r in results if r.error is not None] + problems:
        _error(message)
    _error(f"Added {added} noqa directive{'s' if added != 1 else ''}.")
    return EXIT_ERROR if missing or any(r.error for r in results) else EXIT_CLEAN


def _write_baseline_command(path: str, results: Sequence[FileResult], missing: Sequence[str]) -> int:
    written = baselines.rewrite(path, results)
    for message in list(missing) + [str(r.error) for r in results if r.error is not None]:
        _error(message)
    _error(f"Wrote {written} finding{'s' if written != 1 else ''} to the baseline {path}.")
    return EXIT_ERROR if missing or any(r.error for r in results) else EXIT_CLEAN


def _model_cache(groups) -> Optional[Path]:  # the project model is kept with the first results cache
    return next((cache.directory for _, _, cache in groups if cache is not None), None)


def _buffer_projects(buffer: SourceFile) -> Projects:  # a buffer on stdin stands for its file
    projects = Projects(checked=[buffer.path])
    project = projects.of(buffer.path)
    if project is not None:
        project.update(buffer.path, buffer.text)
    return projects


def _texts(results: Sequence[FileResult]) -> dict:
    """File texts for code frames, read only for files with findings, and decoded as they were
    for checking (a BOM, a PEP 263 declaration: a latin-1 file shows its own characters)."""
    texts = {}
    for result in results:
        if result.findings:
            try:
                texts.update(read_source(result.filename).texts_by_frame())
            except SourceError:
                pass
    return texts


def _report(results: Sequence[FileResult], sources: dict, missing: Sequence[str], args: argparse.Namespace,
            filtered: Optional[baselines.Filtered] = None, targets: str = "") -> int:
    results = sorted_results(results)
    for message in missing:
        _error(message)
    errors = [r.error for r in results if r.error is not None]
    for error in errors:
        _error(str(error))
    if args.output_file:
        colour = False
    else:
        colour = wants_colour(sys.stdout)
    if args.statistics:
        text = statistics(results, as_json=args.output_format in MACHINE_FORMATS,
                          baselined=filtered.baselined if filtered else None)
    else:
        text = render(args.output_format, results, sources, colour=colour)
    if args.output_file:
        os.makedirs(os.path.dirname(os.path.abspath(args.output_file)), exist_ok=True)
        with open(args.output_file, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    if not (args.quiet or args.statistics or (args.output_format in MACHINE_FORMATS and not args.output_file)):
        print(summary(results, colour=wants_colour(sys.stderr)), file=sys.stderr)
        if filtered is not None:
            print(filtered.summary(), file=sys.stderr)
        if targets:
            print(targets, file=sys.stderr)
    if errors or missing:
        return EXIT_ERROR
    return EXIT_FINDINGS if any(r.findings for r in results) and not args.exit_zero else EXIT_CLEAN


# -- torchdevice-fix ----------------------------------------------------------------------------
@_internal_errors_exit_2
def fix_main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="torchdevice-fix", description="Rewrite device-portability hazards in PyTorch code.")
    parser.add_argument("--version", action="version", version=f"torchdevice-fix {__version__}")
    _selection_options(parser)
    _fix_options(parser)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file would change")
    args = parser.parse_args(argv)
    try:
        return _fix_command(args)
    except ConfigError as error:
        _error(f"torchdevice-fix: error: {error}")
        return EXIT_ERROR


def _fix_command(args: argparse.Namespace) -> int:
    resolver, run = _resolver(args)
    shown = _show(args, resolver, run)
    if shown is not None:
        return shown
    return _fix_run(args, resolver, run)


def _fix_run(args: argparse.Namespace, resolver: SettingsResolver, run: Settings) -> int:
    """torchdevice-fix's run; ``check --fix`` runs it too, then reports what remains as
    ``check`` reports findings (its output format, output file and exit code)."""
    from_check = getattr(args, "command", None) == "check"
    write = not (args.diff or args.check)
    baseline = baselines.configured(run, args.baseline, args.no_baseline)  # before any file is written
    if args.paths == ["-"]:
        source = _stdin_source(args)
        if source is None:
            return EXIT_ERROR
        if _stdin_excluded(args, resolver, run):
            sys.stdout.write("" if args.diff else source.text)
            return EXIT_CLEAN
        engine = Engine(run, all_rules(), _buffer_projects(source))
        result = fix_file(engine, source.path, run.unsafe_fixes, write=False, source=source)
        if result.error:
            sys.stdout.write(source.text)
            _error(str(result.error))
            return EXIT_ERROR
        sys.stdout.write(result.diff() if args.diff else result.fixed)
        return _fix_exit([result], args, (), baselines.apply(baseline, [result.remaining] if result.remaining else [])[0])
    files, missing = _discover(args, resolver, run)
    # Every group's cache directory is accepted or refused before the first file is written.
    groups = [(settings, group, _cache(args, settings, False)) for settings, group in resolver.groups(files)]
    for message in missing if not from_check or args.diff else ():
        _error(message)
    progress = Progress(0 if args.quiet else len(files), sys.stderr, verb="Fixing")
    results = []
    try:
        with StopOnInterrupt() as stop:
            with stored_projects(_model_cache(groups), files, args.paths) as projects:
                for settings, group, cache in groups:
                    results.extend(fix_paths(Engine(settings, all_rules(), projects), group, settings.unsafe_fixes, write,
                                             jobs=args.jobs, cache=cache, stop=lambda: stop.requested, on_done=progress.advance))
        interrupted = stop.requested
    except KeyboardInterrupt:  # a second SIGINT stops inside a file; its write still completes
        interrupted = True
    progress.close()
    if interrupted:
        _error("torchdevice-fix: interrupted; every file is either unchanged or completely fixed")
        return EXIT_INTERRUPTED
    results.sort(key=lambda r: r.path)
    if from_check and not args.diff:
        if not args.quiet:
            _error(fix_summary(results, [], False, run.unsafe_fixes, resolver))
        remaining, filtered = baselines.apply(baseline, [r.remaining or FileResult(r.path, error=r.error) for r in results])
        return _report(remaining, _texts(remaining), missing, args, filtered, resolver.targets_note(files))
    for result in results:
        if result.error:
            _error(str(result.error))
        elif args.diff and result.changed:
            sys.stdout.write(result.diff())
    remaining, filtered = baselines.apply(baseline, sorted_results([r.remaining for r in results if r.remaining is not None]))
    if not args.diff:
        sys.stdout.write(FORMATS["concise"](remaining, {}))
    if not args.quiet:
        for line in fix_summary(results, remaining, args.diff or args.check, run.unsafe_fixes, resolver).splitlines():
            _error(line)
        if filtered is not None:
            _error(filtered.summary())
        for line in resolver.targets_note(files).splitlines():
            _error(line)
    return _fix_exit(results, args, missing, remaining)


def _fix_exit(results, args: argparse.Namespace, missing: Sequence[str], remaining: Sequence[FileResult]) -> int:
    if missing or any(r.error for r in results):
        return EXIT_ERROR
    if args.exit_zero:
        return EXIT_CLEAN
    if args.diff or args.check:
        return EXIT_FINDINGS if any(r.changed for r in results) else EXIT_CLEAN
    return EXIT_FINDINGS if any(r.findings for r in remaining) else EXIT_CLEAN


if __name__ == "__main__":  # pragma: no cover
    sys.exit(lint_main())
