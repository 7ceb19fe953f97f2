"""Settings: rule selection, suppression and fix policy.

The values come from ``[tool.torchdevice-lint]`` (read by ``app.config``) and the command line;
the analysis only reads them.
"""

from __future__ import annotations

import ast
import io
import keyword
import os
import re
import tokenize
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from .fixes import ImportSpec

DEFAULT_TARGET_TORCH_VERSION = "2.4"
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "__pycache__", "build", "dist",
    "node_modules", "site-packages", ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".torchdevice_cache", ".ipynb_checkpoints",
)
#: The longest ``per-file-timeout``: a day of CPU time for one file (the OS timer takes no more
#: than about 1e16 seconds, and no file needs more than minutes; 0 means no limit).
MAX_PER_FILE_TIMEOUT = 86_400


class ConfigError(Exception):
    """Bad configuration: reported as a usage error (exit code 2)."""


@dataclass(frozen=True)
class Settings:
    select: Sequence[str] = ("TDV",)
    extend_select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    per_file_ignores: Dict[str, Sequence[str]] = field(default_factory=dict)
    unsafe_fixes: bool = False
    device_name: str = "device"
    #: The module-level binding's value; None: chosen from ``target_torch_version``
    #: (``knowledge.torch_releases.binding_expression``).
    device_expression: Optional[str] = None
    #: An import the device expression needs, e.g. ``from deepspeed.accelerator import get_accelerator``.
    device_import: Optional[str] = None
    exclude: Sequence[str] = DEFAULT_EXCLUDES
    extend_exclude: Sequence[str] = ()
    target_torch_version: str = DEFAULT_TARGET_TORCH_VERSION
    #: Where ``target_torch_version`` came from (a setting, the torch requirement of the file's
    #: project, the default), for settings output; findings never depend on it.
    target_torch_source: str = "default"
    #: Skip what ``.gitignore``/``.ignore`` files ignore (ruff's ``respect-gitignore``).
    respect_gitignore: bool = True
    #: Apply the excludes to files named on the command line too (pre-commit passes names).
    force_exclude: bool = False
    #: Also report code nothing in the project calls or names (``project/reached.py``), and
    #: code behind options nothing documented turns on (``project/configs.PassedOptions``); a
    #: package others install is always checked whole.
    check_unreached: bool = False
    #: Codes whose fixes may be applied (ruff's ``fixable``/``unfixable``; the more specific
    #: prefix wins, ``unfixable`` wins ties): the others keep their fix as a suggestion only.
    fixable: Sequence[str] = ("ALL",)
    unfixable: Sequence[str] = ()
    #: ``check``'s report format when ``--output-format`` is not given (None: ``full``).
    output_format: Optional[str] = None
    #: Where results are cached (``cache-dir``, relative to ``root``); None: the default place.
    cache_dir: Optional[str] = None
    #: Directory that relative per-file-ignores and exclude patterns are matched against.
    root: str = "."
    #: CPU seconds one file may take to check or fix before it gets an error and the run goes
    #: on (0: no limit). Generated files can take minutes; no real source file takes seconds.
    per_file_timeout: float = 60.0
    #: The baseline ``check`` reads (relative to ``root``): findings it holds are not reported.
    baseline: Optional[str] = None
    #: TDV905: gitignore patterns of the platform layer, where backend APIs may be used, and
    #: the backend APIs it bans elsewhere (empty: every ``torch.<backend>``).
    allowed_backend_paths: Sequence[str] = ()
    banned_backend_apis: Sequence[str] = ()

    def __post_init__(self) -> None:
        # Both are written into users' files verbatim: a name that is not an identifier would
        # turn valid files into syntax errors, and anything but one expression could run code.
        if not self.device_name.isidentifier() or keyword.iskeyword(self.device_name):
            raise ConfigError(f"device-name must be a Python identifier, not {self.device_name!r}")
        if self.device_expression is not None:
            check_expression(self.device_expression)
        if not any(code.strip() for code in self.select):
            raise ConfigError("select must name at least one rule code or prefix, such as TDV")
        timeout = self.per_file_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout <= MAX_PER_FILE_TIMEOUT:
            raise ConfigError(
                f"per-file-timeout must be a number of seconds from 0 (no limit) to {MAX_PER_FILE_TIMEOUT}, not {timeout!r}"
            )
        # Checked now: pathspec compiles a pattern only when the first file is matched, and a
        # bad one would then fail every file instead of the configuration.
        check_patterns("exclude", self.exclude)
        check_patterns("extend-exclude", self.extend_exclude)
        check_patterns("per-file-ignores", self.per_file_ignores)

    def target_version(self) -> tuple:
        """``target-torch-version`` as a comparable tuple, ``"2.6"`` -> ``(2, 6)``."""
        return parse_version(self.target_torch_version)

    def with_overrides(self, **changes) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def is_enabled(self, code: str, default_enabled: bool, extra_ignores: Iterable[str] = ()) -> bool:
        """ruff's selection: the most specific matching prefix wins, ignore wins ties; opt-in
        rules need a prefix that names their family (``TDV9``) or the code itself."""
        selected = _longest_prefix(code, list(self.select) + list(self.extend_select))
        ignored = _longest_prefix(code, list(self.ignore) + list(extra_ignores))
        if selected <= ignored:
            return False
        return default_enabled or selected > len("TDV")

    def is_fixable(self, code: str) -> bool:
        return _longest_prefix(code, self.fixable) > _longest_prefix(code, self.unfixable)

    def ignores_for(self, path: str) -> List[str]:
        relative = relative_path(path, self.root)
        codes: List[str] = []
        for pattern, pattern_codes in self.per_file_ignores.items():
            if path_matches(relative, pattern):
                codes.extend(pattern_codes)
        return codes


def check_expression(code: str) -> None:
    """Raise ConfigError unless ``code`` is one Python expression on one line, without comments."""
    problem = None
    try:
        ast.parse(code, mode="eval")
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (SyntaxError, ValueError, tokenize.TokenError):
        problem = "is not a Python expression"
    else:
        if any(token.type == tokenize.COMMENT for token in tokens):
            problem = "must not contain a comment"
        elif any(token.type in (tokenize.NL, tokenize.NEWLINE) and token.string for token in tokens):
            problem = "must be written on one line"
    if problem:
        raise ConfigError(f"device-expression {problem}: {code!r}")


def check_patterns(key: str, patterns: Iterable[str]) -> None:
    """Raise ConfigError naming the first pattern that is not a gitignore pattern (``[z-a]``)."""
    for pattern in patterns:
        body = pattern.strip()
        body = body[1:].strip() if body.startswith("!") else body
        try:
            compiled_patterns((body,))
        except (ValueError, re.error) as error:
            reason = getattr(error, "msg", None) or str(error)
            raise ConfigError(f"{key}: {pattern!r} is not a valid glob pattern ({reason})") from None


def parse_version(text: str) -> tuple:
    try:
        parts = tuple(int(part) for part in text.strip().split(".")[:2])
    except ValueError:
        raise ConfigError(f"target-torch-version must look like '2.4', not {text!r}") from None
    return parts + (0,) * (2 - len(parts))


def parse_import(text: str) -> List[ImportSpec]:
    """``"from a.b import c as d, e"`` / ``"import a.b"`` -> the imports it names."""
    try:
        statements = ast.parse(text.strip()).body
    except SyntaxError:
        statements = []
    small = statements[0] if len(statements) == 1 else None
    if isinstance(small, ast.Import):
        return [ImportSpec(alias.name, asname=alias.asname) for alias in small.names]
    if isinstance(small, ast.ImportFrom) and not small.level and not any(alias.name == "*" for alias in small.names):
        return [ImportSpec(small.module, alias.name, alias.asname) for alias in small.names]
    raise ConfigError(f"device-import must be one absolute import statement, not {text!r}")


def _longest_prefix(code: str, prefixes: Iterable[str]) -> int:
    best = 0
    for prefix in prefixes:
        prefix = prefix.strip().upper()
        if prefix == "ALL":
            prefix = "TDV"
        if prefix and code.startswith(prefix):
            best = max(best, len(prefix))
    return best


def relative_path(path: str, root: str) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return Path(path).as_posix()


def path_matches(relative: str, pattern: str) -> bool:
    """gitignore semantics (``pathspec``): a pattern without a slash matches at any depth, one
    with a slash is anchored at the root and its ``*`` stays inside one directory
    (``src/*.py`` does not match ``src/pkg/deep.py``), ``**`` crosses directories, a trailing
    ``/`` matches a directory and everything below it. A leading ``!`` negates: the pattern
    matches every path the rest does not (ruff's per-file-ignores reading of ``!``)."""
    pattern = pattern.strip()
    if pattern.startswith("!"):
        return bool(pattern[1:].strip()) and not path_matches(relative, pattern[1:])
    return bool(pattern) and compiled_patterns((pattern,)).match(relative)


class IgnorePatterns:
    """Gitignore patterns read as git reads them. A file is matched by pathspec's
    ``GitIgnoreSpec``; a directory by the last pattern that matches its path as git matches it
    (with a slash for a pattern that ends in one, without for the rest: ``foo/**`` holds what is
    in ``foo``, not ``foo``), since ``GitIgnoreSpec`` lets an earlier ``*`` win over a later
    ``!*/`` or ``!img/``, which would hide every file of a whitelist ``.gitignore`` (``*``,
    ``!*/``, ``!*.*``: qiuqiangkong/audioset_tagging_cnn)."""

    def __init__(self, lines: Sequence[str]) -> None:
        import pathspec  # a base dependency; imported here so the start-up of a run stays small

        self.files = pathspec.GitIgnoreSpec.from_lines(lines)

    def check(self, relative: str, is_dir: bool = False) -> Optional[bool]:
        """True: ignored, False: re-included by a ``!`` pattern, None: no pattern matches."""
        if not is_dir:
            return self.files.check_file(relative).include
        directory, verdict = relative.rstrip("/"), None
        for pattern in self.files.patterns:
            if pattern.include is None:
                continue
            only_directories = (getattr(pattern, "pattern", None) or "").rstrip().endswith("/")
            if pattern.match_file(directory + "/" if only_directories else directory) is not None:
                verdict = pattern.include
        return verdict

    def match(self, relative: str, is_dir: bool = False) -> bool:
        return bool(self.check(relative, is_dir))


def ignore_file_spec(lines: List[str]) -> IgnorePatterns:
    """An ignore file's patterns; a line that is no pattern (``[z-a]``) matches nothing, as in
    git, rather than failing the run."""

    def is_pattern(line: str) -> bool:
        try:
            IgnorePatterns([line])
        except (ValueError, re.error):
            return False
        return True

    try:
        return IgnorePatterns(lines)
    except (ValueError, re.error):
        return IgnorePatterns([line for line in lines if is_pattern(line)])


@lru_cache(maxsize=256)
def compiled_patterns(patterns: Tuple[str, ...]) -> IgnorePatterns:
    """The patterns as one gitignore file: later lines win, ``!`` re-includes."""
    return IgnorePatterns(patterns)
