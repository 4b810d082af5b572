"""Fixtures shared by several test modules."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from redis_servers import any_url, cluster_url, redis_server, redis_url  # noqa: F401


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One Spark session (local[2]) for every Spark test module: Spark is slow to start on two
    cores. The driver is held to ``spark.driver.maxResultSize=64m`` and
    ``spark.driver.memory=1g`` for every test."""
    pytest.importorskip("pyspark", reason="the [spark] extra is required")
    from pyspark.sql import SparkSession

    if shutil.which("java") is None:
        pytest.fail("java is not installed: run scripts/setup-test.sh (default-jre-headless)")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("neardup-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.maxResultSize", "64m")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # (the many small jobs of each run would otherwise keep their plans and metrics in the
        # 1 GB driver: the settings run_dedup_cli gives a session it starts)
        .config("spark.sql.ui.retainedExecutions", "20")
        .config("spark.ui.retainedJobs", "50")
        .config("spark.ui.retainedStages", "50")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
