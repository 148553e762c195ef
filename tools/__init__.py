"""The course's maintenance tools, each a command run from the repository root as ``python -m tools.NAME``
(see each module's usage; ``make`` calls them so). ``python tools/NAME.py`` there runs the same: nb.py and
public_book.py import nothing of the repository but ``bertfamily``; standalone.py runs itself again with -m
(its halves colab_manifest.py and colab_host.py are modules it imports, not commands)."""
