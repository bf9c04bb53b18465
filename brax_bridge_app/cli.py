"""The ``brax-bridge`` command line: list envs, train, compare trainers and algorithms, evaluate, render, benchmark.

Run ``brax-bridge --help`` (or ``python -m brax_bridge_app.cli --help``) for the commands, and ``--help`` after any
command for its flags. Hyperparameter flags override the env's preset; every value is validated before
anything is built or compiled. Every ``--help`` speaks one dialect (``helpformat``): UPPERCASE metavars, and each
flag's default as ``[default: X]`` or ``[no default]``.
"""

import os
import warnings

# Quiet start-up: these must be set before JAX, TensorFlow-style C++ logging or absl are imported.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", message=".*[Ee]xplicitly requested dtype.*")

import gc  # noqa: E402
import importlib.metadata  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Annotated, Any  # noqa: E402

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from brax_bridge_app import algorithms, config_files, helpformat, hparams, rundir  # noqa: E402
from brax_bridge_app.flags import HP_PANEL, with_hparams  # noqa: E402, F401  (HP_PANEL: the sections' title)

# Each command imports the application modules it runs (and with them JAX, MuJoCo and torch) only when it runs,
# so `brax-bridge --help` answers without loading them; hparams (with the schema it reads), config_files (whose
# keys --config's help lists) and rundir are plain Python.
logging.getLogger("absl").setLevel(logging.ERROR)
logging.getLogger("jax").setLevel(logging.ERROR)

console = Console()
app = typer.Typer(
    name="brax-bridge",
    help="Train and compare PPO, APG, SHAC and SAC on MuJoCo MJX environments with JAX and with PyTorch (through the "
    "DLPack bridge).",
    # A bare `brax-bridge` prints this help and succeeds (root_callback); click's no_args_is_help would exit 2.
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's help layout (helpformat): whole flag names and reflowed paragraphs at any terminal width.
    rich_markup_mode=None,
    cls=helpformat.CommandList,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": helpformat.MAX_WIDTH},
)


def command(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers a command whose ``--help`` lists its options in sections (``helpformat.SectionedCommand``)."""
    return app.command(name, cls=helpformat.SectionedCommand)


DEVICE_METAVAR = "auto|cpu|cuda|cuda:N"

# compare's default seeds: enough runs per trainer for the statistics to give a verdict (stats.MIN_SEEDS; the
# command line imports no JAX or SciPy to build its help, so the number is repeated here and a test ties the two).
MIN_SEEDS = 5
DEFAULT_SEEDS = "0,1,2,3,4"
DEFAULT_TRAINERS = ",".join(hparams.TRAINERS)


def _device_help(what: str) -> str:
    return (f"where {what} run: auto (JAX's default device where torch can reach it, else the CPU), cpu, cuda or "
            "cuda:N (the Nth GPU)")


def _env_help(required: str) -> str:
    return ("environment: a registered name (see `brax-bridge envs`), playground:TASK, or your own brax_core Env "
            f"class or factory as module.path:NAME or path/to/file.py:NAME; required {required}")


def _config_help(command: str, unused: str) -> str:
    """--config's help, naming only the keys ``command`` reads (``config_files.SETTINGS``)."""
    keys = ", ".join(config_files.SETTINGS[command])
    return (f"settings from a file: a run folder's config.json{unused}, or YAML with its sections (env, algorithm, "
            f"network, run) or flat, with {keys} and hyperparameter names as keys; flags given beside it override it")


def _logger_help(folder: str, readers: str) -> str:
    return (f"where metrics go besides {folder} metrics.jsonl (always written: {readers} read it): one or more of "
            f"jsonl, tensorboard (event files in {folder} {rundir.TENSORBOARD}/), wandb (Weights & Biases; "
            "WANDB_MODE=offline writes locally), comma-separated")


TRAINER_METAVAR = "|".join(hparams.TRAINERS)
PRESET_HELP = helpformat.with_default(
    "hyperparameter preset: an env's name, or ant-gpu, humanoid-gpu or halfcheetah-gpu for Brax's GPU recipes",
    "the env's own, where it has one",
)
WANDB_PROJECT_HELP = helpformat.with_default("with --logger wandb: the W&B project",
                                             "WANDB_PROJECT where set, else W&B's own")
WANDB_ENTITY_HELP = helpformat.with_default("with --logger wandb: the W&B entity, a user or team",
                                            "WANDB_ENTITY where set, else W&B's own")
WandbProjectOption = Annotated[str | None, typer.Option(metavar="TEXT", help=WANDB_PROJECT_HELP)]
WandbEntityOption = Annotated[str | None, typer.Option(metavar="TEXT", help=WANDB_ENTITY_HELP)]


def _fail(message: str) -> typer.BadParameter:
    return typer.BadParameter(message)


def _check_env(env: str | None) -> str:
    """``--env`` checked (a user's env imported and built, nothing compiled); returns it as the run folder records
    it (a file path made absolute)."""
    from brax_bridge_app import envinfo

    if not env:
        raise _fail("--env is required; run `brax-bridge envs` to list them")
    problem = envinfo.check_name(env)
    if problem is not None:
        raise _fail(f"--env {problem}")
    return envinfo.canonical(env)


def _check_run_env(spec: Any, flag: str) -> None:
    """The env of a run folder's ``config.json`` (``spec``) can still be built (a user's module or file may have
    moved)."""
    from brax_bridge_app import envinfo

    problem = envinfo.check_name(spec.env_name, spec.import_dir)
    if problem is not None:
        raise _fail(f"{flag}: the run's env cannot be built: {problem}")


def _check_algo_trainer(algo: str | None, trainer: str | None) -> tuple[str, str]:
    """``--algo`` (default ppo) and ``--trainer`` (default: the algorithm's first), refused where unknown or where
    the algorithm has no such trainer."""
    if trainer is not None and trainer not in hparams.TRAINERS:
        raise _fail(f"--trainer must be one of: {', '.join(hparams.TRAINERS)}; got {trainer!r}")
    try:
        algo = algorithms.check_algo(algo or "ppo")
        return algo, algorithms.check_trainer(algo, trainer)
    except algorithms.AlgorithmError as err:
        raise _fail(str(err)) from None


def _check_device(device: str) -> str:
    """``--device`` checked against what JAX and torch can run here (before anything compiles); returns it as given,
    which the run folder records."""
    from brax_bridge_app import runtime

    try:
        runtime.place(device)
    except ValueError as err:
        raise _fail(str(err)) from None
    return device


def _resolve(
    env: str, preset: str | None, flag_values: dict[str, Any], configured: dict[str, Any] | None = None, **settings: Any
) -> Any:
    """The run's configuration of ``settings["algo"]`` (``configuration.resolve``), or the flag's error."""
    from brax_bridge_app import configuration

    try:
        return configuration.resolve(env, preset, flag_values, configured, **settings)
    except hparams.HParamError as err:
        raise _fail(str(err)) from None


def _with_config_file(config_file: Path | None, command: str, **flags: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The command's settings (each flag given, else the config file's) and the file's hyperparameters."""
    try:
        settings, configured, note = config_files.merged(
            None if config_file is None else str(config_file), command, flags)
    except config_files.ConfigFileError as err:
        raise _fail(f"--config {err}") from None
    if note:
        console.print(f"[yellow]{note}[/]")
    return settings, configured


def _check_loggers(logger: str) -> tuple[str, ...]:
    """``--logger`` names, each with its extra installed (checked before anything is built or compiled)."""
    from brax_bridge_app import loggers

    try:
        return loggers.parse(logger)
    except ValueError as err:
        raise _fail(str(err)) from None


def _finish_run(summary: dict[str, Any], run_dir: str) -> None:
    """Prints a run's summary and exits as its status says: 130 (128 + SIGINT, as a shell reports a process Ctrl-C
    ended, so `train ... && next-step` does not go on) after a stop, 1 after a failure."""
    from brax_bridge_app import runs

    runs.print_summary(summary, run_dir, console)
    if summary["status"] in ("interrupted", "aborted"):
        raise typer.Exit(130)
    if summary["status"] == "failed":
        raise typer.Exit(1)


@command("envs")
def envs_command(
    names: Annotated[
        list[str] | None,
        typer.Argument(metavar="NAMES", help=helpformat.with_default(
            "only these environments: registered names, playground:TASK, module.path:NAME or path/to/file.py:NAME",
            "every registered environment, and MuJoCo Playground's task names where its extra is installed")),
    ] = None,
) -> None:
    """List the registered environments, or describe the named ones: observation and action sizes, default
    episode length, dt, and whether the step differentiates (for --algo apg|shac).

    Sizes come from the model and from abstract evaluation of reset (no physics is compiled or stepped).
    """
    from brax_bridge_app import envinfo

    problems = [problem for name in names or () if (problem := envinfo.check_name(name)) is not None]
    if problems:
        raise _fail(f"NAMES: {'; '.join(problems)}")

    table = Table(title="brax_core environments")
    for header in ("name", "obs", "actions", "episode", "dt (s)", "gradient"):
        # the sizes never wrap; a long name (a user's file path) folds
        table.add_column(header, justify="left" if header == "name" else "right", no_wrap=header != "name",
                         overflow="fold")
    broken = []
    found = envinfo.describe_all(names)
    for info in found:
        if info.error:
            broken.append(info)
            table.add_row(info.name, "-", "-", "-", "-", "-")
            continue
        table.add_row(info.name, str(info.observation_size), str(info.action_size), str(info.episode_length),
                      "-" if info.dt is None else f"{info.dt:g}", (info.differentiable or "-").split(":")[0])
    console.print(table)
    for info in broken:
        console.print(f"[yellow]{info.name}: unavailable ({info.error})[/]")
    for info in found:
        if info.differentiable and info.differentiable.startswith("no"):
            console.print(f"[yellow]{info.name}: APG and SHAC cannot train it ({info.differentiable[4:]})[/]")
    console.print("obs, actions: observation and action sizes; episode: default episode length (steps); gradient: "
                  "whether the step differentiates through its physics, as --algo apg|shac need")
    playground = [] if names else envinfo.playground_names()
    if playground:
        console.print(f"MuJoCo Playground tasks (describe one with `brax-bridge envs NAME`): {', '.join(playground)}")


@command("train")
@with_hparams
def train_command(
    env: Annotated[str | None, typer.Option(metavar="NAME", help=helpformat.with_default(
        _env_help("unless --resume or --config gives it"), None))] = None,
    algo: Annotated[str | None, typer.Option(metavar="|".join(algorithms.ALGOS), help=helpformat.with_default(
        "the algorithm: ppo, apg (Brax's analytic policy gradient), shac (Short-Horizon Actor-Critic) or sac (Soft "
        "Actor-Critic, off-policy from a replay buffer); apg and shac follow the gradient of the return through the "
        "physics; each takes the hyperparameter flags its help "
        "marks with it, and refuses the others", "ppo, or the one of --resume's run or --config's file"))] = None,
    trainer: Annotated[
        str | None,
        typer.Option(metavar=TRAINER_METAVAR, help=helpformat.with_default(
            "jax (brax_core's trainer) or torch (through the bridge); --algo shac trains with torch only",
            "jax (ppo, sac); torch (apg, shac)")),
    ] = None,
    preset: Annotated[str | None, typer.Option(metavar="NAME", help=PRESET_HELP)] = None,
    out: Annotated[Path | None, typer.Option(metavar="DIR", file_okay=False, help=helpformat.with_default(
        "the run folder to write", "runs/ENV-TRAINER-TIME (runs/ENV-ALGO-TRAINER-TIME with --algo apg|shac|sac)"))
    ] = None,
    seed: Annotated[int | None, typer.Option(metavar="INT", help=helpformat.with_default("random seed", "0"))] = None,
    resume: Annotated[
        Path | None, typer.Option(metavar="DIR", file_okay=False, help=helpformat.with_default(
            "continue the run in this folder from its checkpoint, instead of starting a new run; "
            + algorithms.resume_text(), None))
    ] = None,
    device: Annotated[str | None, typer.Option(metavar=DEVICE_METAVAR, help=helpformat.with_default(
        _device_help("training's physics and networks"), "auto"))] = None,
    allow_changes: Annotated[
        bool, typer.Option(help="with --resume of a PPO run: let hyperparameter flags change the checkpoint's "
                                "configuration")
    ] = False,
    config_file: Annotated[Path | None, typer.Option("--config", metavar="FILE", dir_okay=False,
                                                     help=helpformat.with_default(_config_help("train", ""), None))
                           ] = None,
    logger: Annotated[str, typer.Option(metavar="NAMES", help=_logger_help(
        "the run folder's", "summaries, --resume and compare"))] = "jsonl",
    wandb_project: WandbProjectOption = None,
    wandb_entity: WandbEntityOption = None,
    flag_values: dict = None,
) -> None:
    """Train one algorithm with one trainer on one environment, with a live progress bar; writes a run folder.

    The folder holds config.json (the algorithm and every resolved hyperparameter), metrics.jsonl (one line per
    report, at env steps), the checkpoint, learning_curve.png and summary.json. Ctrl-C stops at the next report and
    saves a resumable checkpoint there; --resume DIR continues it exactly (with a larger --num-timesteps it trains
    on). --config FILE reads the settings from a file (a run's config.json, or YAML); --logger adds TensorBoard or
    Weights & Biases; eval RUN evaluates the policy of a run of any algorithm.

    Every hyperparameter flag overrides the preset's value; where the preset sets none, the flag's default is the
    one shown for the algorithm, and Python's (the trainers' keyword defaults) is shown beside it where that
    differs. --algo apg or shac trains with the gradient of the return through the physics instead of PPO; --algo sac
    trains Soft Actor-Critic from a replay buffer.
    """
    from brax_bridge_app import envinfo, loggers, resume_rules, runs

    logger_names = _check_loggers(logger)
    if resume is not None:
        if out is not None or seed is not None or device is not None or config_file is not None:
            raise _fail("--resume continues the run in its own folder with its own config.json, seed and device; "
                        "leave out --out, --seed, --device and --config")
        run_dir = str(resume)
        try:
            spec = resume_rules.resumed(run_dir, algo, env, trainer, preset, flag_values, allow_changes)
        except rundir.RunDirError as err:
            raise _fail(f"--resume: {err}") from None
        except resume_rules.ResumeError as err:
            raise _fail(str(err)) from None
    else:
        if allow_changes:
            raise _fail("--allow-changes applies to --resume only")
        settings, configured = _with_config_file(
            config_file, "train", env=env, algo=algo, trainer=trainer, seed=seed, preset=preset, device=device)
        algo, trainer = _check_algo_trainer(settings["algo"], settings["trainer"])
        env = _check_env(settings["env"])
        seed = 0 if settings["seed"] is None else settings["seed"]
        device = _check_device(settings["device"] or "auto")
        config = _resolve(env, settings["preset"], flag_values, configured, algo=algo, trainer=trainer, seed=seed,
                          device=device)
        if algo in algorithms.GRADIENT_ALGOS:
            _check_differentiable(env, config)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        parts = [envinfo.folder_name(env), *([algo] if algo != "ppo" else []), trainer, stamp]
        run_dir = str(out) if out is not None else os.path.join("runs", "-".join(parts))
        spec = runs.new_run(config)
    console.print(f"training [bold]{spec.trainer}[/] {spec.algo.upper()} on [bold]{spec.env_name}[/] "
                  f"({spec.config.run.num_timesteps:,} env steps, preset {spec.config.run.preset}) -> {run_dir}")
    resume_step = runs.checkpoint_step(spec, os.path.join(run_dir, rundir.CHECKPOINT)) if resume else None
    try:
        with runs.sigint_stops(runs.StopFlag(), console) as stop, loggers.opened(
            logger_names, run_dir, spec, resume_step, wandb_project, wandb_entity
        ) as extra_loggers:
            summary = runs.train_run(run_dir, spec, console, resume=resume is not None, stop=stop,
                                     allow_changes=allow_changes, loggers=extra_loggers)
    except rundir.RunDirError as err:  # e.g. --resume of a run that stopped before its first checkpoint
        raise _fail(f"--resume: {err}" if resume is not None else str(err)) from None
    except loggers.LoggerError as err:
        raise _fail(str(err)) from None
    _finish_run(summary, run_dir)


def _check_differentiable(env: str, config: Any) -> None:
    """Refuses, before anything compiles, an env whose step JAX cannot differentiate in reverse mode, as
    ``TorchEnv(differentiable=True)`` refuses it (from shapes)."""
    from brax_bridge_app import envinfo

    try:
        envinfo.check_differentiable(env, config.env.episode_length)
    except ValueError as err:
        raise _fail(f"--env {env}: {err}") from None


@command("compare")
@with_hparams
def compare_command(
    env: Annotated[str | None, typer.Option(metavar="NAME", help=helpformat.with_default(
        _env_help("unless --config gives it"), None))] = None,
    out: Annotated[Path | None, typer.Option(metavar="DIR", file_okay=False, help=helpformat.with_default(
        "the folder to write the report in, beside one run folder per trainer and seed", "runs/compare_ENV"))
    ] = None,
    seeds: Annotated[
        str | None, typer.Option(metavar="INTS", help=helpformat.with_default(
            f"comma-separated seeds, each trained by every trainer; a verdict needs at least {MIN_SEEDS}",
            DEFAULT_SEEDS))
    ] = None,
    preset: Annotated[str | None, typer.Option(metavar="NAME", help=PRESET_HELP)] = None,
    trainers: Annotated[
        str | None, typer.Option(metavar="NAMES", help=helpformat.with_default(
            "which trainers to run: jax, torch, or both comma-separated; with --algos, each algorithm runs with "
            "those of them it has", DEFAULT_TRAINERS))
    ] = None,
    algos: Annotated[
        str | None, typer.Option(metavar="NAMES", help=helpformat.with_default(
            "the algorithms to compare, comma-separated from ppo, apg, shac, sac: each runs every seed with each "
            "trainer of --trainers it has, at the same --num-timesteps (PPO's where PPO runs), and the report "
            "compares them as it compares trainers (each as ALGO/TRAINER); each algorithm takes the hyperparameter "
            "flags it has, "
            "and a flag none of them has is refused", "ppo, or the algorithm of --config's file"))
    ] = None,
    device: Annotated[str | None, typer.Option(metavar=DEVICE_METAVAR, help=helpformat.with_default(
        _device_help("every run's physics and networks"), "auto"))] = None,
    threshold: Annotated[
        float | None, typer.Option(metavar="FLOAT", help=helpformat.with_default(
            "an eval reward: the report gives the time (seconds and env steps) each run first reached it; without "
            "it, no such time is reported", None))
    ] = None,
    config_file: Annotated[Path | None, typer.Option("--config", metavar="FILE", dir_okay=False,
                                                     help=helpformat.with_default(_config_help(
                                                         "compare", " (its trainer and seed are not used)"), None))
                           ] = None,
    logger: Annotated[str, typer.Option(metavar="NAMES", help=_logger_help(
        "each run folder's", "the summaries and the report"))] = "jsonl",
    wandb_project: WandbProjectOption = None,
    wandb_entity: WandbEntityOption = None,
    flag_values: dict = None,
) -> None:
    """Train both trainers (or, with --algos, several algorithms) with the same hyperparameters and seeds, each
    run in a process of its own; write compare.json, compare.png and report.md.

    Runs go seed by seed, the contestant that goes first alternating, each in its own folder (OUT/TRAINER-seedK/,
    OUT/ALGO-TRAINER-seedK/ with --algos). The report gives each contestant's interquartile mean (IQM) with a 95 %
    bootstrap interval and, for two, a verdict from the probability of improvement; compare.png draws the IQM curves
    with their bands against env steps and wall time.

    Every hyperparameter flag overrides the preset's value; where the preset sets none, the flag's default is the
    one shown for the algorithm, and Python's (the trainers' keyword defaults) is shown beside it where that
    differs.
    """
    from brax_bridge_app import comparison, envinfo, report, stats

    # The runs' processes get this environment as it is now, before this process starts JAX.
    with comparison.no_accelerator_memory_held() as child_env:
        logger_names = _check_loggers(logger)
        settings, configured = _with_config_file(
            config_file, "compare", env=env, algo=None, preset=preset, device=device, seeds=seeds, trainers=trainers)
        env = _check_env(settings["env"])
        seed_list = _parse_seeds(settings["seeds"] or DEFAULT_SEEDS)
        trainer_text = settings["trainers"] or DEFAULT_TRAINERS
        trainer_list = [t.strip() for t in trainer_text.split(",") if t.strip()]
        distinct = len(set(trainer_list)) == len(trainer_list)
        if not trainer_list or not distinct or any(t not in hparams.TRAINERS for t in trainer_list):
            raise _fail(f"--trainers must list distinct names from {', '.join(hparams.TRAINERS)}; got {trainer_text!r}")
        if threshold is not None and not math.isfinite(threshold):
            raise _fail(f"--threshold must be a finite number; got {threshold}")
        device = _check_device(settings["device"] or "auto")
        try:
            configs, contestants = comparison.plan_algorithms(
                algos or settings["algo"], trainer_list, env, settings["preset"], flag_values, configured, device)
        except (algorithms.AlgorithmError, hparams.HParamError) as err:
            raise _fail(str(err)) from None
        for algo in configs:
            if algo in algorithms.GRADIENT_ALGOS:
                _check_differentiable(env, configs[algo])
        out_dir = str(out) if out is not None else os.path.join("runs", f"compare_{envinfo.folder_name(env)}")
        os.makedirs(out_dir, exist_ok=True)
        notes = []
        if len(seed_list) < MIN_SEEDS:
            notes.append(f"{len(seed_list)} seed(s) per trainer: fewer than the {MIN_SEEDS} a verdict needs, so the "
                         f"report gives none (the default --seeds is {DEFAULT_SEEDS})")
            console.print(f"[yellow]note: {notes[-1]}[/]")
        logger_args = ["--logger", ",".join(logger_names)]
        logger_args += [*(["--wandb-project", wandb_project] if wandb_project else []),
                        *(["--wandb-entity", wandb_entity] if wandb_entity else [])]
        plan = comparison.Plan(configs, contestants, out_dir, trainer_list, seed_list, device, threshold, logger_args,
                               notes, env)
        summaries, result, stopped = comparison.compare(plan, console, child_env)
        console.print(report.rich_table(summaries, result, title=f"{env}: {' vs '.join(plan.labels)}",
                                        threshold=threshold))
        console.print(f"[bold]{stats.verdict(result)}[/]")
        console.print(f"report: {os.path.join(out_dir, 'report.md')}, figure: {os.path.join(out_dir, 'compare.png')}")
        if stopped or any(s["status"] in ("interrupted", "aborted") for s in summaries):
            raise typer.Exit(130)
        if any(s["status"] == "failed" for s in summaries):
            raise typer.Exit(1)


def _parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise _fail(f"--seeds must be comma-separated integers like 0,1,2; got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise _fail(f"--seeds must be distinct non-negative integers like 0,1,2; got {text!r}")
    return seeds


@command("eval")
def eval_command(
    run_dir: Annotated[
        Path, typer.Argument(help="a run folder written by `brax-bridge train`", file_okay=False, metavar="RUN_DIR")
    ],
    episodes: Annotated[int, typer.Option(metavar="INT", help="episodes to run (in parallel); >= 1")] = 10,
    render: Annotated[bool, typer.Option(help="write an HTML viewer and a video of the first episode")] = False,
    deterministic: Annotated[bool, typer.Option(
        "--deterministic/--stochastic", help="act with the policy's mode, or sample its actions")] = True,
    seed: Annotated[int, typer.Option(metavar="INT", help="seed of the evaluation episodes")] = 0,
    video: Annotated[str, typer.Option(metavar="mp4|gif|none", help="video format with --render")] = "gif",
    device: Annotated[str, typer.Option(metavar=DEVICE_METAVAR, help=_device_help(
        "the evaluation's physics and policy"))] = "auto",
) -> None:
    """Load a run's checkpoint, run N episodes and report mean/std return; --render writes viewers."""
    from brax_bridge_app import configuration, evaluate, runtime

    if episodes < 1:  # checked here rather than by click, whose range wording differs between its versions
        raise _fail(f"--episodes must be >= 1; got {episodes}")
    if video not in ("mp4", "gif", "none"):
        raise _fail(f"--video must be mp4, gif or none; got {video!r}")
    _check_device(device)
    placement = runtime.place(device)
    try:
        spec = configuration.read_run(str(run_dir))
        _check_run_env(spec, "RUN_DIR")
        with runtime.placed(placement):
            policy = evaluate.load_policy(str(run_dir), spec, deterministic, placement)
    except rundir.RunDirError as err:
        raise _fail(f"RUN_DIR: {err}") from None
    mode = "deterministic" if deterministic else "stochastic"
    console.print(f"evaluating the {spec.trainer} {spec.algo.upper()} policy on {spec.env_name}: {episodes} episodes "
                  f"({mode}) "
                  f"on {placement.torch_device}")
    with runtime.placed(placement):
        result = evaluate.run_episodes(spec, policy, episodes, seed, record=render)
    summary = {
        "episodes": episodes, "deterministic": deterministic, "seed": seed,
        "mean_return": float(result.returns.mean()), "std_return": float(result.returns.std()),
        "min_return": float(result.returns.min()), "max_return": float(result.returns.max()),
        "mean_length": float(result.lengths.mean()), "returns": result.returns.tolist(),
    }
    console.print(f"return {summary['mean_return']:.1f} ± {summary['std_return']:.1f} "
                  f"(min {summary['min_return']:.1f}, max {summary['max_return']:.1f}; "
                  f"mean length {summary['mean_length']:.0f} steps)")
    if render:
        summary["render"] = evaluate.render(str(run_dir), spec, result, video, console)
    rundir.write_json(os.path.join(str(run_dir), rundir.EVAL), summary)


def _refuse_out(value: str | None) -> None:
    """bench writes a file, named with --json: --out names a folder in every other command, so bench refuses it
    and names the flag to use."""
    if value is not None:
        raise typer.BadParameter(f"bench writes its results to a file, named with --json FILE (--out names a folder "
                                 f"in train and compare); use --json {value}", param_hint="--out")


@command("bench")
def bench_command(
    size: Annotated[
        str, typer.Option(metavar="small|medium|large", help="small (seconds), medium (minutes) or large")
    ] = "small",
    json_file: Annotated[Path | None, typer.Option("--json", metavar="FILE", dir_okay=False, help=(
        helpformat.with_default("also write the results to this JSON file", None)))] = None,
    out: Annotated[str | None, typer.Option("--out", hidden=True, callback=_refuse_out)] = None,
) -> None:
    """Run the benchmark suite (benchmarks/*.py of a source checkout) at a chosen size and print the tables.

    The benchmark scripts are not installed with the package: run this from the root of a source checkout.
    """
    from brax_bridge_app import bench, runtime

    if size not in bench.SIZES:
        raise _fail(f"--size must be one of: {', '.join(bench.SIZES)}; got {size!r}")
    try:
        results = bench.run_all(size, console)
    except bench.BenchmarksNotFound as err:
        console.print(f"[red]{err}[/]")
        raise typer.Exit(1) from None
    if json_file is not None:
        rundir.write_json(str(json_file), {"size": size, "machine": runtime.machine(), "results": results})
        console.print(f"results: {json_file}")


def _print_version(value: bool) -> None:
    if value:
        # The installed distribution's version (pyproject.toml's), read without importing a package that would
        # start configuring JAX.
        typer.echo(f"brax-bridge {importlib.metadata.version('brax-bridge')}")
        raise typer.Exit()


@app.callback()
def root_callback(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="Show the version and exit.")] = False,
) -> None:
    """The command list's own options (``--version``); without a command, the help, and success."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit()


def main() -> None:
    """Console-script entry point (``brax-bridge``): the last thing its process does. Code that runs a command
    inside a longer-lived process calls ``app`` instead (as typer's ``CliRunner`` does)."""
    try:
        app()
    finally:
        # Leaving the interpreter runs the garbage collector over every object still alive, which after a run are
        # the million or so of JAX, torch and MuJoCo: about five seconds per command on a 2-core CPU. The command
        # has closed what it wrote by now, so those objects go to the collector's permanent generation and the
        # interpreter frees them by reference counting alone (gc.freeze), in well under a second.
        gc.freeze()


if __name__ == "__main__":
    main()
