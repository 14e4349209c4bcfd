"""marg's test suite (a regular package, so that ``tests.conftest`` is ours even where another distribution —
diffprivlib — installs a top-level ``tests``)."""
