"""A small project written into a folder and one of its files checked with the project model,
as the CLI checks a file inside a repository."""

from pathlib import Path
from typing import Dict, List, Optional

from torchdevice_lint import api
from torchdevice_lint.model.findings import Finding
from torchdevice_lint.model.settings import Settings
from torchdevice_lint.project.model import Projects


def project_findings(root: Path, files: Dict[str, str], checked: str, settings: Optional[Settings] = None) -> List[Finding]:
    """Write ``files`` (name -> code) and a ``setup.py`` marking the root, then check ``checked``
    (by default with code nothing calls checked too: these projects are about a line, not its callers)."""
    (root / "setup.py").write_text("")
    for name, code in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(code)
    path = root / checked
    settings = settings if settings is not None else Settings(check_unreached=True)
    return api.engine(settings, projects=Projects()).check_source(str(path), path.read_text()).findings
