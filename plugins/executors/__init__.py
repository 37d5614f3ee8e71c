"""Built-in executors: this process, a local process pool, a Dask cluster."""
