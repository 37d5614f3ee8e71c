"""ldpsim's built-in plugins.

Each module is registered through its own entry point in ``pyproject.toml``
and uses only ldpsim's public API, exactly as a third-party plugin would.
"""
