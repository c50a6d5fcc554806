#!/usr/bin/env bash
# Real Python wordings of import failures. Run from an empty scratch directory:
#   import_errors.sh PYTHON OUT_DIR
# writes OUT_DIR/python-module-not-found.txt, python-cannot-import-name.txt,
#        python-cannot-import-name-package.txt, python-m-package-missing.txt, python-m-module-missing.txt,
#        python-script-missing.txt
set -u
PY=$1
OUT=$2
# 1. a module that does not exist
"$PY" -c "import verl_nonexistent" > "$OUT/python-module-not-found.txt" 2>&1
# 2. a name that a module does not have
"$PY" -c "from os import nonexistent_name" > "$OUT/python-cannot-import-name.txt" 2>&1
# 3. the same from a package with a verl-like layout (an empty stub package made here, so that the
#    wording shows the package path the way `from verl.utils import X` would)
mkdir -p stub/verl/utils
: > stub/verl/__init__.py
: > stub/verl/utils/__init__.py
(cd stub && "$PY" -c "from verl.utils import nonexistent_name") > "$OUT/python-cannot-import-name-package.txt" 2>&1
# 4. the interpreter's own refusals: `python -m` of a package that is not installed, of a module that
#    does not exist, and a script that is not there (no traceback: one line from the interpreter)
"$PY" -m verl_nonexistent.trainer.main_ppo > "$OUT/python-m-package-missing.txt" 2>&1
"$PY" -m verl_nonexistent_main_ppo > "$OUT/python-m-module-missing.txt" 2>&1
"$PY" missing_main_ppo.py > "$OUT/python-script-missing.txt" 2>&1
exit 0
