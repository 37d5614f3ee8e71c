"""Built-in estimators."""
