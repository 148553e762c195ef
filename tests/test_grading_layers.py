"""The grading package's layout: each module imports only from modules of earlier layers (its imports
inside functions included), so the flow reads top to bottom and no import cycle can come back."""
import ast
from pathlib import Path

import bertfamily.grading

PACKAGE = Path(bertfamily.grading.__file__).parent
#: The flow: a submission -> its prepared copy -> a sealed run -> verification -> scoring -> a row ->
#: a class -> the gradebook and feedback (a cluster and the command line on top).
LAYERS = [
    {"student", "textsafe", "safeio", "budget", "cgroupv1"},
    {"exercise", "marks", "channel", "trees", "cgroups", "hub"},
    {"literals", "magics"},
    {"submission", "integrity", "nbval_worker"},
    {"monitor", "mounts", "verify", "causes"},
    {"sandbox"},
    {"scoring", "copies"},
    {"pipeline"},
    {"policy"},
    {"classroom", "gradebook"},
    {"fingerprints", "lms"},
    {"journal"},
    {"cluster", "regrade"},
    {"cli"},
]


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = node.module if not node.level else f"bertfamily.grading.{node.module}"
            if module == "bertfamily.grading":
                found.update(a.name for a in node.names)
            elif module.startswith("bertfamily.grading."):
                found.add(module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("bertfamily.grading."))
    return found


def test_every_module_has_a_layer_and_imports_only_from_earlier_ones():
    layer = {name: n for n, names in enumerate(LAYERS) for name in names}
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert modules == set(layer), modules ^ set(layer)
    wrong = [f"{m} (layer {layer[m]}) imports {i} (layer {layer.get(i)})" for m in sorted(modules)
             for i in sorted(_imports(PACKAGE / f"{m}.py")) if i != m and layer.get(i, len(LAYERS)) >= layer[m]]
    assert wrong == []
