"""The Spark benchmark's parts (bench/spark_bench.py): two clusters and their data,
the three measured paths (batch reader, mirror job, SDK loop) and the check that
every path copied every record exactly once."""
