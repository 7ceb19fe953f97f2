"""``python -m torchdevice_lint check|rule ...`` runs ``torchdevice-lint``, and
``python -m torchdevice_lint fix ...`` runs ``torchdevice-fix``: for environments whose scripts
directory is not on PATH."""

import sys

from .cli import fix_main, lint_main


def main() -> int:
    arguments = sys.argv[1:]
    if arguments[:1] == ["fix"]:
        return fix_main(arguments[1:])
    return lint_main(arguments)


if __name__ == "__main__":
    sys.exit(main())
