"""The grading package's layout: each module imports only from modules of earlier layers (its imports
inside functions included), so the flow reads top to bottom and no import cycle can come back."""

import ast
from pathlib import Path

import bertfamily.grading

PACKAGE = Path(bertfamily.grading.__file__).parent
#: The flow: a submission -> its prepared copy -> a sealed run -> verification -> scoring -> a row ->
#: a class -> the gradebook and feedback (a cluster and the command line on top).
LAYERS = [
    {"student", "textsafe", "safeio", "budget", "cgroupv1", "lateness", "denylist", "folders", "blackboard"},
    {"exercise", "marks", "channel", "trees", "cgroups", "hub", "standins"},
    {"literals", "magics"},
    {"submission", "integrity", "nbval_worker"},
    {"monitor", "mounts", "verify", "causes"},
    {"sandbox"},
    {"scoring", "copies"},
    {"pipeline"},
    {"counting"},
    {"policy", "preload"},
    {"classroom", "gradebook"},
    {"fingerprints", "lms", "moodle", "canvas"},
    {"journal", "feedbackfiles"},
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
    wrong = [
        f"{m} (layer {layer[m]}) imports {i} (layer {layer.get(i)})"
        for m in sorted(modules)
        for i in sorted(_imports(PACKAGE / f"{m}.py"))
        if i != m and layer.get(i, len(LAYERS)) >= layer[m]
    ]
    assert wrong == []


# ------------------------------------------------------------------ no course folder, few course modules

#: The grader is given the course's files (--reference, --sanitize): it never finds them from its own
#: place, which an installed package does not share with the course's book/ and tests/.
COURSE_PARTS = {"book", "tests", "docs", "_toc.yml", "exercise_distilbert.ipynb"}
#: The course's modules the grader imports, and why each stays (the rest of what it needs is in grading/).
COURSE_IMPORTS = {
    "bertfamily": "the package itself: its version, and its folder (the kernel's copy, the served configs)",
    "bertfamily.checks": "the check cells' functions: the grader compares the check cells and re-runs their verdicts",
    "bertfamily.answers": "the checks' answer reading: the grader runs them without the self-check's look for saved "
    "files (it checks the run's own files)",
    "bertfamily.exercise_rules": "what a student may import: the same rules in a student's kernel and in the sandbox",
    "bertfamily.kernels": "the course's pinned numerical kernels: a run reproduces the committed outputs only under "
    "them (one home: the lessons' first cell pins them too)",
    "bertfamily.imports": "a faster start of each process that reads notebooks (imports no torch, no lesson)",
    "bertfamily.budget": "the parameter count a submitted model is checked against (verify.py): the course's own "
    "calculator, which the exercise's tasks ask about",
}


def course_paths(tree: ast.AST) -> list[str]:
    """Where a module finds a path from its own file's place, or names a folder or file of the course."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "__file__":
            found.append(f"line {node.lineno}: __file__")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("parent", "parents")
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "parent"
        ):
            found.append(f"line {node.lineno}: .parent.{node.attr}")
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
            found.append(f"line {node.lineno}: .parents[...]")
        elif isinstance(node, ast.Constant) and node.value in COURSE_PARTS:
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def course_imports(tree: ast.AST) -> set[str]:
    """The modules of ``bertfamily`` outside ``bertfamily.grading`` that a module imports."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "bertfamily":
                found.update(
                    f"bertfamily.{a.name}"
                    if (PACKAGE.parent / f"{a.name}.py").is_file() or (PACKAGE.parent / a.name).is_dir()
                    else "bertfamily"
                    for a in node.names
                )
            elif node.module.startswith("bertfamily."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "bertfamily")
    return {m for m in found if m != "bertfamily.grading" and not m.startswith("bertfamily.grading.")}


def test_the_grader_finds_no_course_folder_from_its_own_place():
    found = {p.name: course_paths(ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(PACKAGE.glob("*.py"))}
    assert {name: where for name, where in found.items() if where} == {}


def test_the_grader_imports_only_the_course_modules_it_names():
    used = set().union(*(course_imports(ast.parse(p.read_text(encoding="utf-8"))) for p in PACKAGE.glob("*.py")))
    assert used == set(COURSE_IMPORTS), used ^ set(COURSE_IMPORTS)  # the list is kept true: it can only shrink


def test_the_checks_find_a_planted_course_path_and_import():
    planted = ast.parse(
        "from pathlib import Path\nfrom bertfamily import models\nimport bertfamily.kernels\n"
        "ROOT = Path(__file__).resolve().parents[3]\nREFERENCE = ROOT / 'book' / 'x.ipynb'\n"
        "up = ROOT.parent.parent\n"
    )
    assert sorted(course_paths(planted)) == [
        "line 4: .parents[...]",
        "line 4: __file__",
        "line 5: 'book'",
        "line 6: .parent.parent",
    ]
    assert course_imports(planted) == {"bertfamily.models", "bertfamily.kernels"}


def test_the_kernels_checks_stub_is_read_from_the_checks_text_as_importing_them_gives_it():
    """The grader writes the kernel's ``checks`` (every check function, the literal constants, no answer key)
    from checks.py's text, so that no grading command imports torch for it: the same module as reading the
    imported module's names gave."""
    import subprocess
    import sys

    from bertfamily import checks
    from bertfamily.grading import channel

    names = sorted(n for n in vars(checks) if n.startswith("check_") and callable(getattr(checks, n)))
    constants = "\n".join(
        f"{n} = {v!r}"
        for n, v in vars(checks).items()
        if n.isupper() and isinstance(v, (str, int, float)) and not n.startswith("_")
    )
    assert names and "DISTILBERT = 'distilbert-base-uncased'" in constants
    assert channel.kernel_checks_source() == channel.KERNEL_CHECKS.format(constants=constants, names=names)
    code = "import sys; from bertfamily.grading import channel; channel.kernel_checks_source(); "
    code += "print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
