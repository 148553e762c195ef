"""The tables :mod:`~bertfamily.grading.integrity` reads a submission's own code with: modules, names,
attributes and texts no solution of the exercise needs, and what each can do to a graded run."""

#: Modules no solution of the exercise needs, and what importing them can do to a graded run.
#: (:data:`HARMLESS_CALLS` of theirs, with no argument, are not said.)
MODULES = {
    "gc": "reach any object of the interpreter",
    "ctypes": "write the interpreter's memory",
    "runpy": "run the grader's exporter",
    "importlib": "swap modules",
    "site": "find the folders whose .pth files Python runs",
    "builtins": "replace built-ins",
    "subprocess": "run programs",
    "signal": "signal processes",
    "socket": "open sockets",
    "pty": "open terminals",
    "multiprocessing": "start processes",
    "_thread": "start threads",
    "threading": "start threads",
    "IPython": "reach the kernel's machinery",
    "pkgutil": "import by name",
    "zipimport": "import from archives",
    "marshal": "load compiled code",
    "code": "run code from a string",
    "codeop": "compile code from a string",
    "pickle": "run code hidden in bytes",
    "dill": "run code hidden in bytes",
    "cloudpickle": "run code hidden in bytes",
    "inspect": "reach the interpreter's frames",
    "unittest": "replace any function by its name (mock.patch)",
    "mock": "replace any function by its name",
    "pytest": "replace any function by its name (monkeypatch)",
    "_pytest": "replace any function by its name (monkeypatch)",
}
NAMES = {
    "__builtins__": "touches the built-ins",
    "__import__": "imports by name",
    "exec": "runs code from a string",
    "eval": "runs code from a string",
    "compile": "compiles code from a string",
    "get_ipython": "reaches the kernel's machinery",
    "update_wrapper": "copies one object's attributes onto another (a module's too)",
    "wraps": "copies one object's attributes onto another (a module's too)",
    "dictConfig": "sets attributes on what it makes (logging.config)",
    "fileConfig": "sets attributes on what it makes (logging.config)",
    "setattr": "sets attributes by name",
    "delattr": "deletes attributes by name",
    "globals": "edits the namespace by name",
    "publish_display_data": "publishes raw display messages",
    "vars": "reads a namespace by name",
    "breakpoint": "runs the debugger",
}
#: Attributes no solution needs, through which code reaches a module's or a function's namespace
#: (``f.__globals__``, ``vars(module)``), the interpreter's frames or its classes' insides: what
#: rewrites the grader's exporter from inside the kernel.
DUNDERS = {
    "__globals__",
    "__builtins__",
    "__dict__",
    "__code__",
    "__closure__",
    "__subclasses__",
    "__bases__",
    "__mro__",
    "__func__",
    "__self__",
    "__getattribute__",
    "__loader__",
    "__spec__",
    "__wrapped__",
    "__kwdefaults__",
    "__defaults__",
    "f_globals",
    "f_locals",
    "f_back",
    "f_builtins",
    "gi_frame",
    "tb_frame",
    "cr_frame",
    "__traceback__",
    "__reduce__",
    "__reduce_ex__",
    "__setattr__",
    "__import__",
}
#: Built-ins the grader's exporter line and the checks rely on: a student's own binding of one of these
#: names (``def globals(): ...``) changes what the exporter reads.
SHADOWED = {
    "globals",
    "locals",
    "vars",
    "__import__",
    "exec",
    "eval",
    "compile",
    "open",
    "print",
    "isinstance",
    "type",
    "getattr",
    "setattr",
    "hasattr",
    "repr",
    "id",
    "str",
    "int",
    "float",
    "dict",
    "list",
    "len",
    "runpy",
    "json",
    "checks",
    "__builtins__",
}
#: What the runtimes and editors students work in put in a notebook: Colab's own module (its Drive mount,
#: its forms, its files), IPython's display tools. Not installed where the grader runs (google.colab), or
#: harmless there: never a flag.
#: Calls of a module above that an honest notebook makes (``gc.collect()`` after freeing a model, as on Colab):
#: the module imported and used only so is not said; any other use of it is.
HARMLESS_CALLS = {"gc": {"collect"}}
RUNTIME_MODULES = ("google.colab", "IPython.display", "IPython.core.display")
#: A shell line an honest Colab notebook holds (``!pip install -q transformers``): an install, nothing chained.
PIP = ("pip install", "pip -q install", "pip3 install", "python -m pip install")
#: Shell commands that only look (``!ls -lh {workdir}`` after saving, ``!nvidia-smi`` on Colab): not said when
#: the line chains, redirects and substitutes nothing, and its ``{fields}`` are plain names.
LOOKING_COMMANDS = ("ls", "du", "df", "free", "nvidia-smi", "pwd", "nproc", "lscpu", "whoami", "date", "uptime")
#: The course's calculators: they predict what tasks 2, 6 and 9 ask to count or measure.
CALCULATORS = (
    "bertfamily.budget",
    "bertfamily.quantization",
    "bertfamily.models.published_config",
    "bertfamily.checks",
)
ATTRIBUTES = {
    ("config", "dictConfig"),
    ("config", "fileConfig"),
    ("sys", "modules"),
    ("sys", "settrace"),
    ("sys", "setprofile"),
    ("sys", "displayhook"),
    ("sys", "path_hooks"),
    ("sys", "meta_path"),
    ("sys", "path_importer_cache"),
    ("sys", "excepthook"),
    ("sys", "addaudithook"),
    ("os", "fork"),
    ("os", "forkpty"),
    ("os", "kill"),
    ("os", "killpg"),
    ("os", "system"),
    ("os", "popen"),
    ("os", "setsid"),
    ("os", "execv"),
    ("os", "execve"),
    ("os", "execvp"),
    ("os", "posix_spawn"),
    ("os", "spawnv"),
}
STRINGS = ("/proc", "/grader", "bertfamily-grade", "vnd.bertfamily", "/sys/", "/dev/shm")
#: Attributes the grader's answers travel through in the kernel (IPython's display machinery): no solution
#: reads or sets them, whatever object (a module, an alias, a function's parameter) they are reached through.
CHANNEL_ATTRIBUTES = {
    "publish_display_data": "publishes raw display messages",
    "display_pub": "IPython's publisher",
    "displayhook": "the kernel's display hook",
    "excepthook": "the kernel's error hook",
    "user_ns": "the kernel's namespace",
    "user_global_ns": "the kernel's namespace",
    "_ip": "IPython's shell, held by exit and quit",
    "ast_transformers": "rewrites the code of every later cell, the grader's exporter line's too",
    "input_transformers_cleanup": "rewrites the text of every later cell",
    "input_transformers_post": "rewrites the text of every later cell",
    "input_transformer_manager": "rewrites the text of every later cell",
}
#: The functions the grader's exporter line runs through in the kernel (it reads its file with ``runpy``, through
#: ``io.open_code``; it writes the answers with ``json``, which asks ``numbers`` and ``codecs``), the file reads
#: and stats of the sizes it reports, and the built-ins it calls: replaced (``x.dumps = f``, ``x.open_code = f``)
#: through whatever holds the module (a function's parameter, an unpacked name), the exporter would run the
#: student's code. Named one by one, so that an honest attribute of the same name as something generic
#: (``tokenizer.decoder``, ``args.type``) is not one of them, and the same on every Python.
EXPORTER_ATTRIBUTES = frozenset(
    "dumps dump loads JSONEncoder JSONDecoder encode iterencode encode_basestring encode_basestring_ascii "
    "c_make_encoder open_code run_path run_module import_module module_from_spec spec_from_file_location "
    "spec_from_loader exec_module get_code source_to_code decode_source getencoder getdecoder Integral Real Number "
    "getsize lstat st_size read_bytes read_text open isinstance getattr hasattr setattr globals locals vars "
    "__import__ exec eval compile repr _default_encoder _make_iterencode py_encode_basestring_ascii "
    "c_encode_basestring_ascii py_encode_basestring c_encode_basestring update_wrapper".split()
)
#: What a solution may call on ``checks`` (the exercise's own check cells call the rest).
CHECKS_ALLOWED = ("check_", "for_the_instructor")
