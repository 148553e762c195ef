"""The course's maintenance tools, each a command run from the repository root as ``python -m tools.NAME``
(see each module's usage; ``make`` calls them so). ``tools/nb.py`` runs as a script too."""
