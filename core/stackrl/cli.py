"""The ``stackrl`` command: train, list plugins, show and validate configs."""

from __future__ import annotations

import argparse
import json
import sys

from stackrl.errors import StackrlError


def _split(items: list[str]) -> tuple[list[str], list[str]]:
    """Config files and ``key=value`` overrides, as given on the command line."""
    return [i for i in items if "=" not in i], [i for i in items if "=" in i]


def _load(items):
    from stackrl.config import load_config

    files, overrides = _split(items)
    if not files:
        raise StackrlError("give at least one config file")
    return load_config(files, overrides)


def cmd_train(args) -> None:
    from stackrl.run import build_trainer

    config = _load(args.config)
    trainer = build_trainer(config)
    trainer.train(resume_from_checkpoint=args.resume)
    trainer.save_model(trainer.args.output_dir)
    print(f"run written to {trainer.args.output_dir}")


def cmd_plugins(args) -> None:
    from stackrl.manager import HOOKS, PluginManager, installed_plugins

    rows = []
    for name, info in installed_plugins().items():
        row = {"name": name, "distribution": info.distribution, "version": info.version}
        try:
            cls = info.load()
            plugin = cls()
            plugin.name = name
            manager = PluginManager([plugin])
            row["hooks"] = [hook for hook in HOOKS if manager.has(hook)]
            row["status"] = "ok"
        except Exception as exc:  # a broken plugin is listed, never a crash
            row["status"] = f"broken: {exc}"
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        print("no stackrl plugins installed")
    for row in rows:
        detail = ", ".join(row["hooks"]) if row["status"] == "ok" else row["status"]
        print(f"{row['name']:<20} {row['distribution']} {row['version']:<10} {detail}")


def cmd_config(args) -> None:
    config = _load(args.config)
    if args.action == "show":
        print(config.to_yaml(), end="")
        return
    from stackrl.run import validate

    manager = validate(config)
    order = ", ".join(config.plugin_classes) or "none"
    exclusive = {hook: manager.implementers(hook) for hook in ("generate_rollout", "estimate_advantages")}
    print(f"config ok: plugins in call order: {order}; exclusive hooks: {exclusive}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="stackrl", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train with stacked configs: stackrl train a.yaml b.yaml key=value ...")
    train.add_argument("config", nargs="+", metavar="CONFIG_OR_OVERRIDE")
    train.add_argument("--resume", nargs="?", const=True, default=None, metavar="CHECKPOINT",
                       help="resume from CHECKPOINT, or from the run's last checkpoint")
    train.set_defaults(func=cmd_train)

    plugins = sub.add_parser("plugins", help="list installed plugins, their versions and hooks")
    plugins.add_argument("--json", action="store_true")
    plugins.set_defaults(func=cmd_plugins)

    config = sub.add_parser("config", help="show or validate stacked configs without loading a model")
    config.add_argument("action", choices=["show", "validate"])
    config.add_argument("config", nargs="+", metavar="CONFIG_OR_OVERRIDE")
    config.set_defaults(func=cmd_config)

    args = parser.parse_args(argv)
    try:
        args.func(args)
    except StackrlError as exc:
        print(f"stackrl: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
