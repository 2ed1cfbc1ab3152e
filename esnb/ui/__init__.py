"""Views of a run: static bokeh figures (and, in notebooks, live widgets)."""
