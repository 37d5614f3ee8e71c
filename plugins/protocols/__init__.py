"""Built-in heavy-hitter protocols."""
