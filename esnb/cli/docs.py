"""``esnb docs settings``: the settings page (docs/settings.md), derived from the config
dataclasses, so the documentation cannot drift from the code (a test compares them)."""

from __future__ import annotations

from esnb import settings


def settings_markdown() -> str:
    """Every algorithm's settings and where the ``paper`` preset differs from ``laptop``."""
    from esnb.runners.registry import algorithms

    seen: set[type] = set()
    out = ["# Settings of every algorithm",
           "",
           "Generated from the config dataclasses by `esnb docs settings > docs/settings.md`;",
           "do not edit by hand. Each setting is declared once, in its algorithm's",
           "`esnb/runners/<algo>/config.py`: the constructor keywords, the `esnb train` flags",
           "(`--name-with-dashes`), the live controls and this page all come from there.",
           "`preset=\"paper\"` (`--preset paper`) takes the source paper's values; the second",
           "table of each algorithm says where and why the laptop default differs.",
           "",
           "Columns: *default* is the laptop preset's value (2 cores); *paper* is the value",
           "of `--preset paper` where it differs from the default (blank: the paper preset",
           "keeps the default); *live* settings can be changed while the run learns (the",
           "notebook panel, `runner.controls.set`, or given beside `--resume`), the others are",
           "fixed when the run is made; *allowed* is what the constructor and the flag accept",
           "(anything else is refused with this text).",
           ""]
    for name, algo in algorithms().items():
        config = algo.load_config()
        if config in seen:
            continue
        seen.add(config)
        doc = " ".join((config.__doc__ or "").split())
        out += [f"## `esnb train {name}` — {config.display_name()}", "", doc, "",
                settings.markdown_table(config), ""]
        diff = settings.preset_table(config)
        if diff.count("\n") > 1:
            out += ["Where `paper` differs from `laptop`:", "", diff, ""]
        for preset, table in (("laptop", config.laptop_by_env), ("paper", config.paper_by_env)):
            for env, (values, source) in table.items():
                given = ", ".join(f"`{k}={settings.show(v)}`" for k, v in values.items())
                where = f"`{env}<Game>-v5` ids" if env.endswith("/") else env
                out += [f"On {where}, `{preset}` takes {given} instead ({source}).", ""]
    return "\n".join(out).rstrip() + "\n"


def run(args) -> int:
    print(settings_markdown(), end="")
    return 0
