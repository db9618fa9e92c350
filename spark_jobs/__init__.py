"""PySpark data source and jobs for pafka (not built yet)."""
