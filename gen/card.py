"""The dataset card README.md: a YAML header listing configs and data files, then a body from templates/card/."""

from __future__ import annotations

import yaml

from gen import templating


def front_matter(configs: dict[str, dict], split: str, extra: dict | None = None) -> str:
    """`configs:` entries that let `datasets.load_dataset(folder, config)` find each config's files."""
    header = dict(extra or {})
    header["configs"] = [{"config_name": name, "data_files": [{"split": split, "path": info["path"]}]}
                         for name, info in configs.items()]
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n"


def render_card(report: dict, templates_dir: str | None = None) -> str:
    configs = report["configs"]
    header = front_matter({name: {"path": info["path"]} for name, info in configs.items()}, report["split"],
                          {"pretty_name": report["recipe"]["name"]})
    body = templating.render("card/README.md.j2", templates_dir, report=report)
    return header + "\n" + body
