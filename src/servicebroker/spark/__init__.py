"""PySpark integration (an optional extra: ``pip install servicebroker[spark]``).

``servicebroker.spark`` is imported only when used; ``import servicebroker`` never imports
pyspark. :func:`register` adds the ``servicebroker`` data source to a session; :func:`session`
builds a local (or any master URL) SparkSession with the settings measured to work here.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .datasource import ServiceBrokerDataSource, parse_read_options
from .dialog_rows import group_id_for, parse_write_options
from .options import SparkOptionError
from .progress import BatchProgress, QueryProgress, follow
from .quiet import java_options, launch_quietly
from .stream_reader import parse_stream_options

__all__ = [
    "BatchProgress",
    "QueryProgress",
    "ServiceBrokerDataSource",
    "SparkOptionError",
    "follow",
    "group_id_for",
    "parse_read_options",
    "parse_stream_options",
    "parse_write_options",
    "register",
    "session",
]


def register(spark: Any) -> None:
    """Register the ``servicebroker`` data source on ``spark`` (a SparkSession)."""
    spark.dataSource.register(ServiceBrokerDataSource)


def session(
    master: str = "local[2]",
    *,
    app_name: str = "servicebroker",
    temp_dir: str | None = None,
    extra: dict[str, str] | None = None,
) -> Any:
    """A SparkSession with the ``servicebroker`` data source registered.

    Args:
        master: any Spark master URL (default ``local[2]``).
        app_name: the application name.
        temp_dir: folder for Spark's local files and warehouse (default: Spark's own).
        extra: more ``spark.*`` settings.

    Workers run this interpreter (``PYSPARK_PYTHON`` is set to ``sys.executable`` unless already
    set), so they can import servicebroker and pyarrow. Spark logs errors only, and its start-up
    noise is filtered out (:mod:`.quiet`).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    if temp_dir:
        builder = builder.config("spark.local.dir", temp_dir).config(
            "spark.sql.warehouse.dir", os.path.join(temp_dir, "warehouse")
        )
    settings = dict(extra or {})
    settings["spark.driver.extraJavaOptions"] = java_options(
        settings.get("spark.driver.extraJavaOptions")
    )
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = launch_quietly(builder.getOrCreate)
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
