"""Built-in poisoning attacks."""
