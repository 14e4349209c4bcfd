"""Where a site's data lives: the DATA argument of ``marg export`` and ``marg schema init``.

==========================================  ===========================================
DATA                                        source
==========================================  ===========================================
``visits.csv``, ``.tsv``, ``.gz``, Parquet   a file, streamed and counted on this machine
``duckdb://site.db?table=visits``            a DuckDB database (``&schema=``; or ``query=``);
                                            two slashes: relative, ``duckdb:///abs/site.db``: absolute
``duckdb:///path/visits.parquet``            any file DuckDB reads, counted by DuckDB
``postgresql://host/db?table=visits``        PostgreSQL (``&schema=``; or ``query=``)
``omop+duckdb://site.db?cdm=main``            an OMOP CDM (DuckDB or ``omop+postgresql://…/db?cdm=…&results=…``):
                                            one row per cohort entry, built by the codebook's definitions
``--engine spark`` with a path or a table    Spark (local mode or a cluster)
==========================================  ===========================================

Databases and Spark compute the tables inside their own process by one grouped query
(:mod:`.sql`, :mod:`.grouped`): rows never leave them. Every source describes itself for
the bundle without credentials (:meth:`Source.describe`). The engines' client libraries
are optional extras, imported only when such a source is opened.
"""

from __future__ import annotations

from pathlib import Path

from marg.errors import InputError

from .base import Source

ENGINES = ("local", "duckdb", "spark")

__all__ = ["ENGINES", "Source", "open_source"]


def open_source(data: str | Path, *, engine: str | None = None, spark_master: str | None = None) -> Source:
    """The source named by a DATA argument.

    Parameters
    ----------
    data : str or Path
        A file path, a ``duckdb://`` or ``postgresql://`` URI, or (with ``engine="spark"``)
        a path or a table name in Spark's catalog.
    engine : {"local", "duckdb", "spark"}, optional
        Who counts a file: this process (default), DuckDB, or Spark. Database URIs are
        always counted by their database.
    spark_master : str, optional
        Spark master URL (default: the active session's, ``$MARG_SPARK_MASTER``, or ``local[*]``).
    """
    if engine is not None and engine not in ENGINES:
        raise InputError(f"unknown --engine {engine!r} (expected one of {', '.join(ENGINES)})")
    text = str(data)
    scheme = text.split(":", 1)[0].lower() if "://" in text else ""
    if scheme.startswith("omop+"):
        if engine not in (None, "local"):
            raise InputError(f"--engine {engine} cannot read an OMOP CDM URI (its database computes the rows)")
        from .omop_source import open_omop

        return open_omop(text)
    if scheme in ("postgresql", "postgres"):
        if engine not in (None, "local"):
            raise InputError(f"--engine {engine} cannot read a PostgreSQL URI (PostgreSQL counts its own tables)")
        from .postgres_source import PostgresSource

        return PostgresSource(text)
    if scheme == "duckdb":
        if engine not in (None, "local", "duckdb"):
            raise InputError(f"--engine {engine} cannot read a DuckDB URI (DuckDB counts its own tables)")
        from .duckdb_source import DuckDBSource

        return DuckDBSource.from_uri(text)
    if engine == "spark":  # any path Spark reaches (hdfs://, s3a://, …) or a catalog table
        from .spark_source import SparkSource

        return SparkSource(text, master=spark_master)
    if scheme:
        raise InputError(f"unsupported data source scheme {scheme + '://'!r} (files, duckdb://, postgresql://, "
                         "omop+duckdb://, omop+postgresql://; "
                         "other file systems with --engine spark)")
    if engine == "duckdb":
        from .duckdb_source import DuckDBSource

        return DuckDBSource.for_file(Path(text))
    from .files import FileSource

    return FileSource(Path(text))
