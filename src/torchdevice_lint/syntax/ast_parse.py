"""CPython's own parser as the first judge of a file, before LibCST sees it.

LibCST's native parser overflows its stack and kills the process on about 1,500 nested brackets,
and takes time quadratic in the length of a chain such as ``x.cuda().cuda()...`` (2,000 links:
over a minute). CPython refuses the first with a clean ``SyntaxError`` ("too many nested
parentheses") and parses the second in linear time, so a file is parsed by CPython first and
refused when its tree is deeper than ``MAX_DEPTH`` (checked by the first stage's walk,
``first_stage/facts.py``, the one walk of that tree). The price is CPython's grammar: a file is
Python as the interpreter running the tool understands it.
"""

from __future__ import annotations

import ast
import io
import tokenize
import warnings

from ..model.errors import FileProblem

#: The deepest tree analysed. Real code stays far below (at most 35 levels over the 1,914
#: files of the pinned corpus); the analysis walks trees recursively and stops near 500.
MAX_DEPTH = 200

TOO_DEEP = f"file is nested too deeply to analyse (limit {MAX_DEPTH} levels)"


class Unparsable(FileProblem):
    """A file the analysis does not take: a syntax error or nesting too deep. One-line message."""


def compile_python(source: str) -> ast.Module:
    """The file's ``ast`` tree, or ``Unparsable`` with the line to print for it. The tree's depth
    is checked against ``MAX_DEPTH`` by the walk that reads it (``first_stage.facts.parse_facts``)."""
    try:
        with warnings.catch_warnings():  # the file's invalid escapes are not ours to report
            warnings.simplefilter("ignore")
            return compile(source, "<checked>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        if "too many nested" in str(error.msg):
            raise Unparsable(TOO_DEEP) from None
        raise Unparsable(f"syntax error at {error.lineno or 1}:{error.offset or 1}: {error.msg}") from None
    except (RecursionError, MemoryError):  # "maximum recursion depth exceeded during ast construction"
        raise Unparsable(TOO_DEEP) from None
    except ValueError as error:  # "source code string cannot contain null bytes"
        raise Unparsable(f"cannot parse file: {error}") from None


#: Source codecs that only rewrite newer syntax for older Pythons, reading UTF-8 as it is on any
#: Python the tool runs on (twni2016/pomdp-baselines@28cb5dd torchkit/pytorch_utils.py:1
#: ``# -*- coding: future_fstrings -*-``): installed, they register themselves; read as UTF-8 here.
UTF8_SOURCE_CODECS = frozenset({"future_fstrings", "future_annotations"})


def source_encoding(raw: bytes) -> str:
    """The encoding the file's BOM or coding declaration names (PEP 263), else UTF-8. Raises
    ``SyntaxError``/``LookupError`` as ``tokenize.detect_encoding`` does for a codec Python
    does not know, but for ``UTF8_SOURCE_CODECS``."""
    try:
        return tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
    except SyntaxError as error:
        named = (error.msg or "").rpartition("unknown encoding: ")[2].strip().replace("-", "_")
        if named in UTF8_SOURCE_CODECS:
            return "utf-8"
        raise
