"""Writing data files: the one Parquet layout every Lethe writer produces, and the statistics of files whose columns are named otherwise."""
