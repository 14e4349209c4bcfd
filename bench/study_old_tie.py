"""Issue 44 (large): bench/study_accept.py with the study design's final split as it was before ``SELECT_TIE``
(ties at ``TIE``, 1e-4), for side-by-side runs. Same arguments as bench/study_accept.py::

    nice -n 10 .venv/bin/python bench/study_old_tie.py --sets kr-vs-kp --splits 5 --paths study --json R.json
"""

import runpy
import sys
from pathlib import Path

import marg.marginals.study_split as ss

ss.SELECT_TIE = ss.TIE  # design_study reads it at call time
here = Path(__file__).resolve().parent
sys.argv = [str(here / "study_accept.py")] + sys.argv[1:]
sys.path.insert(0, str(here))
runpy.run_path(str(here / "study_accept.py"), run_name="__main__")
