"""spark-on-k8s/ holds top-level scripts, not a package: its directory goes on the
import path so the tests import ``submit`` as mypy does (mypy_path has spark-on-k8s)."""

from __future__ import annotations

import sys

from tests.k8s.spark.tools import SPARK_DIR

if str(SPARK_DIR) not in sys.path:
    sys.path.insert(0, str(SPARK_DIR))
