"""The documented public path ``kidata.spark``: the Spark binding lives in
:mod:`kidata.query.spark`; this module re-exports its public names."""

from kidata.query.spark import SparkViewError, register, spark_identifier, spark_schema

__all__ = ["SparkViewError", "register", "spark_identifier", "spark_schema"]
