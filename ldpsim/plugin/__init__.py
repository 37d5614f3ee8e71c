"""Internal layer of ldpsim; import public names from ``ldpsim``."""
