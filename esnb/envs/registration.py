"""Registers esnb's own gymnasium environments (imported by ``make_env``)."""
