"""The ``stackrl`` command: train, evaluate, plot, show samples, list plugins, start a plugin, show and validate
configs."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import traceback

from stackrl import noise
from stackrl.errors import ConfigErrors, StackrlError, TrainingInterrupted


def _split(items: list[str]) -> tuple[list[str], list[str]]:
    """Config files and ``key=value`` overrides, as given on the command line."""
    return [i for i in items if "=" not in i], [i for i in items if "=" in i]


def _load(items):
    from stackrl.config import load_config

    files, overrides = _split(items)
    if not files:
        raise StackrlError("give at least one config file")
    return load_config(files, overrides)


def _validated(items, command: str | None = None):
    """The config, after every check ``command`` makes before loading anything; notes go to stderr."""
    from stackrl.run import validate

    config = _load(items)
    manager, notes = validate(config, command)
    for note in notes:
        print(f"stackrl: note: {note}", file=sys.stderr)
    return config, manager


def cmd_train(args) -> None:
    from stackrl.console import quiet_library_bars
    from stackrl.plots import PLOTS_DIR
    from stackrl.run import train

    config, _ = _validated(args.config, "train")
    quiet_library_bars()
    result = train(config, resume=args.resume, overwrite=args.overwrite)
    from accelerate import PartialState

    if not PartialState().is_main_process:  # one summary for a multi-process run
        return
    if result["finished_at"] is not None:
        print(
            f"the run in {result['run_dir']} finished at step {result['finished_at']}: nothing to train, nothing "
            "changed (raise trainer.max_steps to train it further)"
        )
    evaluations = result["evaluations"]
    if "after" in evaluations:
        k = config.host.eval.samples
        for metric in ("pass@1", f"maj@{k}"):
            before = f"{evaluations['before'][metric]:.3f} before -> " if "before" in evaluations else ""
            print(f"held-out {metric}: {before}{evaluations['after'][metric]:.3f} after")
    for line in result["activity"]:
        print(f"activity: {line}")
    for line in result["aux_models"]:
        print(f"aux model: {line}")
    for name, count in sorted(result["warnings"].items()):
        print(f"warning: {name} occurred {count} times (metric warnings/{name} in metrics.jsonl)")
    if result["finished_at"] is None:
        print(f"run written to {result['run_dir']}; plots in {result['run_dir']}/{PLOTS_DIR}")


def cmd_eval(args) -> None:
    from stackrl.run import evaluate_checkpoint

    from stackrl.console import quiet_library_bars

    checkpoint = [i.split("=", 1)[1] for i in args.config if i.startswith("checkpoint=")]
    config, _ = _validated([i for i in args.config if not i.startswith("checkpoint=")], "eval")
    quiet_library_bars()
    result = evaluate_checkpoint(config, checkpoint[-1] if checkpoint else None)
    print(json.dumps(result, indent=2))
    if not checkpoint:
        # Figures of the untrained model are easily taken for the trained ones: say so where the user looks.
        print(
            f"evaluated the base model {result['model']}, not a trained one: no checkpoint= given "
            f"(e.g. checkpoint={config.host.output_dir} for the run's final weights)",
            file=sys.stderr,
        )


def cmd_plot(args) -> None:
    from stackrl.plots import plot_runs

    for path in plot_runs(args.run_dir, args.out):
        print(path)


def cmd_samples(args) -> None:
    from stackrl.samples import print_samples, read_samples

    print_samples(read_samples(args.run_dir, args.step))


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
        return
    widths = {key: max(len(row[key]) for row in rows) for key in ("name", "distribution", "version")}
    for row in rows:
        columns = [f"{row[key]:<{width}}" for key, width in widths.items()]
        print("  ".join([*columns, ", ".join(row["hooks"]) if row["status"] == "ok" else row["status"]]))


def cmd_config(args) -> None:
    if args.accelerate and args.action != "validate":
        raise StackrlError("--accelerate goes with 'config validate'")
    if args.action == "show":
        print(_load(args.config).to_yaml(), end="")
        return
    from stackrl.manager import EXCLUSIVE_HOOKS
    from stackrl.run import validate_launch

    config, manager = _validated(args.config)
    order = ", ".join(config.plugin_classes) or "none"
    exclusive = "; ".join(
        f"{hook} by {', '.join(manager.implementers(hook)) or 'the host (GRPO)'}" for hook in EXCLUSIVE_HOOKS
    )
    print(f"config ok: plugins in call order: {order}; {exclusive}")
    if args.accelerate:
        launches, notes = validate_launch(config, args.accelerate)
        print(f"accelerate config ok: {launches}; run it with:")
        print(f"  accelerate launch --config_file {args.accelerate} -m stackrl.cli train {' '.join(args.config)}")
        for note in notes:
            print(f"note: {note}")


def cmd_new_plugin(args) -> None:
    from stackrl.scaffold import new_plugin, next_steps

    folder = new_plugin(args.name, args.dir)
    print(f"wrote {folder}\nnext: {next_steps(folder)}")


def _interrupted(stop: KeyboardInterrupt, args) -> str:
    """What Ctrl-C stopped, and for training, where the last checkpoint is and how to continue from it."""
    if not isinstance(stop, TrainingInterrupted):
        return "interrupted"
    if stop.checkpoint is None:
        return (
            f"{stop}; no checkpoint saved, so the run cannot be resumed. Checkpoints come every trainer.save_steps "
            "steps with trainer.save_strategy=steps"
        )
    command = shlex.join(["stackrl", "train", *args.config, "--resume"])
    return f"{stop}; last checkpoint: {stop.checkpoint}\nresume with: {command}"


SWITCHES = ("--overwrite", "--debug")


def _options_last(argv: list[str]) -> list[str]:
    """The switches and ``--resume`` moved after the configs, so that they may stand anywhere: argparse ends a
    command's configs at the first option. ``--resume`` moves only where what follows it is a config file or an
    override, which it would otherwise take for its checkpoint: ``train --resume a.yaml k=v`` reads as
    ``train a.yaml k=v --resume``."""
    switches = [arg for arg in argv if arg in SWITCHES]
    argv = [arg for arg in argv if arg not in SWITCHES]
    if "--resume" in argv:
        at = argv.index("--resume")
        following = argv[at + 1] if at + 1 < len(argv) else None
        if following is not None and (
            "=" in following or following.endswith((".yaml", ".yml")) or os.path.isfile(following)
        ):
            argv = [*argv[:at], *argv[at + 1:], "--resume"]
    return [*argv, *switches]


def main(argv=None) -> int:
    noise.silence()
    parser = argparse.ArgumentParser(prog="stackrl", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train with stacked configs: stackrl train a.yaml b.yaml key=value ...")
    train.add_argument("config", nargs="+", metavar="CONFIG_OR_OVERRIDE")
    train.add_argument("--resume", nargs="?", const=True, default=None, metavar="CHECKPOINT",
                       help="resume from CHECKPOINT, or from the run's last checkpoint")
    train.add_argument("--overwrite", action="store_true",
                       help="replace the run that output_dir holds (deleted once the new run's model and data load)")
    train.set_defaults(func=cmd_train)

    evaluate = sub.add_parser("eval", help="held-out pass@1 and majority@k: stackrl eval CONFIG... [checkpoint=PATH]")
    evaluate.add_argument("config", nargs="+", metavar="CONFIG_OR_OVERRIDE")
    evaluate.set_defaults(func=cmd_eval)

    plot = sub.add_parser("plot", help="redraw the plots of a run folder, or overlay several runs on the same axes")
    plot.add_argument("run_dir", nargs="+", metavar="RUN_DIR")
    plot.add_argument("--out", metavar="DIR",
                      help="where the PNGs go (default: RUN_DIR/plots; for several runs, comparison/ beside them)")
    plot.set_defaults(func=cmd_plot)

    samples = sub.add_parser("samples", help="print a logged step's groups: prompts, completions, rewards, advantages")
    samples.add_argument("run_dir", metavar="RUN_DIR")
    samples.add_argument("--step", type=int, help="the step to show (default: the last one written)")
    samples.set_defaults(func=cmd_samples)

    plugins = sub.add_parser("plugins", help="list installed plugins, their versions and hooks")
    plugins.add_argument("--json", action="store_true")
    plugins.set_defaults(func=cmd_plugins)

    scaffold = sub.add_parser("new-plugin", help="start a method plugin: a tested package with one example per stage")
    scaffold.add_argument("name")
    scaffold.add_argument("--dir", default="plugins", help="the folder to create it in (default: plugins)")
    scaffold.set_defaults(func=cmd_new_plugin)

    config = sub.add_parser("config", help="show or validate stacked configs without loading a model")
    config.add_argument("action", choices=["show", "validate"])
    config.add_argument("config", nargs="+", metavar="CONFIG_OR_OVERRIDE")
    config.add_argument("--accelerate", metavar="FILE",
                        help="validate: also check this accelerate config file (DDP, DeepSpeed, FSDP) for the run")
    config.set_defaults(func=cmd_config)

    for command in sub.choices.values():
        command.add_argument("--debug", action="store_true", help="on an error, also print the full traceback "
                             "(or set STACKRL_DEBUG=1)")
    args = parser.parse_args(_options_last(sys.argv[1:] if argv is None else list(argv)))
    debug = args.debug or os.environ.get("STACKRL_DEBUG", "0") not in ("", "0")
    try:
        args.func(args)
        if "torch" in sys.modules:  # only a command that loaded torch can have joined a process group
            from stackrl.run import leave_process_group

            leave_process_group()
    except StackrlError as exc:
        if debug:
            traceback.print_exc()
        for error in exc.errors if isinstance(exc, ConfigErrors) else [exc]:
            print(f"stackrl: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        if debug:
            traceback.print_exc()
        print(f"stackrl: {_interrupted(stop, args)}", file=sys.stderr)
        return 130  # the shell's code for a process stopped by SIGINT
    return 0


if __name__ == "__main__":
    sys.exit(main())
