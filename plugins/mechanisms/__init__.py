"""Built-in mechanisms."""
