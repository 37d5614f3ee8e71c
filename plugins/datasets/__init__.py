"""Built-in datasets."""
