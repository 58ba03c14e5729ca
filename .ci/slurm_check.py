#!/usr/bin/env python3
"""The Slurm profile, proven with real submissions: build a single-node Slurm
cluster on this (Debian, root) machine, run the LoCoMo dataset and a small
generated LongMemEval dataset through workflow/profiles/slurm plus the
documented site overlay workflow/profiles/sites/no-accounting, check that every
output is byte-identical to a local run of the same configuration, then stop
the daemons by process id and leave the machine as it was found.

    .venv/bin/python .ci/slurm_check.py [--skip-unsupported]

What it installs (apt-get: slurm-wlm and munge, without recommends) is purged
again at the end, with every file, user and directory the packages made, so
that no Slurm client tools stay behind: with `sinfo` installed and no
controller answering, every later `snakemake` start that has the Slurm
executor plugin installed waits seconds on its probes (`scontrol show config`).
The cluster: slurmctld and slurmd on this host, munge authentication,
accounting disabled (status through squeue, so MinJobAge keeps finished jobs
visible for 10 minutes), one node with this machine's CPUs and memory, one
partition `main` that is not the default (so the overlay's partition setting
is what makes the jobs land).

When not root or not on Debian it says so in one line and exits 1, or 0 when
told to skip (--skip-unsupported or MEMOBENCH_SLURM_CHECK=skip).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ["slurm-wlm", "munge"]
CONF = Path("/etc/slurm/slurm.conf")
T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[slurm-check {time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def sh(*cmd, check=True, env=None, quiet=False, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, **kw)
    if check and proc.returncode != 0:
        raise SystemExit(f"slurm-check: {' '.join(map(str, cmd))} failed ({proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc


def unsupported_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    try:
        osr = Path("/etc/os-release").read_text()
    except OSError:
        osr = ""
    if "ID=debian" not in osr.splitlines() or not shutil.which("apt-get"):
        return "not Debian"
    if CONF.exists():
        return f"{CONF} already exists (this check builds its own cluster only where there is none)"
    return None


def installed_packages() -> set[str]:
    out = sh("dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n").stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith(" installed")}


def slurm_conf(state: Path) -> str:
    host = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return f"""# single-node test cluster written by .ci/slurm_check.py (removed when it ends)
ClusterName=memobench
SlurmctldHost={host}
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/d
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={state}/slurmd.pid
SlurmctldLogFile={state}/slurmctld.log
SlurmdLogFile={state}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# squeue answers the executor's status queries: finished jobs stay visible this long
MinJobAge=600
ReturnToService=2
NodeName={host} CPUs={cpus} RealMemory={mem_mb * 3 // 4} State=UNKNOWN
PartitionName=main Nodes=ALL Default=NO MaxTime=INFINITE State=UP
"""


class Cluster:
    """Install, start, stop and uninstall; everything undone in stop()."""

    def __init__(self):
        self.before = installed_packages()
        self.state = Path(tempfile.mkdtemp(prefix="memobench-slurm-"))
        self.pids: dict[str, int] = {}
        self.made_policy = False
        self.made_run_munge = False
        self.new_packages: list[str] = []

    def install(self):
        say("apt-get update; apt-get install " + " ".join(PACKAGES))
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        sh("apt-get", "update", "-qq", env=env)
        policy = Path("/usr/sbin/policy-rc.d")
        if not policy.exists():  # keep the packages' scripts from starting daemons with their own config
            policy.write_text("#!/bin/sh\nexit 101\n")
            policy.chmod(0o755)
            self.made_policy = True
        try:
            sh("apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES, env=env)
        finally:
            self.new_packages = sorted(installed_packages() - self.before)
            if self.made_policy:
                policy.unlink()
        say(f"installed {len(self.new_packages)} packages: {' '.join(self.new_packages)}")

    def start(self):
        for sub in ("ctld", "d"):
            (self.state / sub).mkdir()
        CONF.parent.mkdir(exist_ok=True)
        CONF.write_text(slurm_conf(self.state))
        if not Path("/etc/munge/munge.key").exists():
            sh("runuser", "-u", "munge", "--", "/usr/sbin/mungekey", "--create")
        run_munge = Path("/run/munge")
        if not run_munge.exists():
            run_munge.mkdir()
            shutil.chown(run_munge, "munge", "munge")
            self.made_run_munge = True
        sh("runuser", "-u", "munge", "--", "/usr/sbin/munged")
        self.pids["munged"] = int(Path("/run/munge/munged.pid").read_text())
        sh("/usr/sbin/slurmctld")
        sh("/usr/sbin/slurmd")
        for name in ("slurmctld", "slurmd"):
            self.pids[name] = self._wait_pid(self.state / f"{name}.pid")
        for _ in range(60):
            out = sh("sinfo", "-h", "-o", "%P %t", check=False).stdout.split()
            if out == ["main", "idle"]:
                break
            time.sleep(0.5)
        else:
            raise SystemExit(f"slurm-check: the node did not come up: sinfo says {out}; see {self.state}/*.log")
        say(f"cluster up: {' '.join(f'{k}={v}' for k, v in self.pids.items())}")

    @staticmethod
    def _wait_pid(path: Path) -> int:
        for _ in range(100):
            if path.exists() and path.read_text().strip():
                return int(path.read_text())
            time.sleep(0.1)
        raise SystemExit(f"slurm-check: no pid file {path}")

    def stop(self):
        for name in ("slurmd", "slurmctld", "munged"):  # by process id, in reverse order of start
            pid = self.pids.pop(name, None)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
        CONF.unlink(missing_ok=True)
        if self.new_packages:
            say("purging " + " ".join(self.new_packages))
            sh("apt-get", "purge", "-y", "-qq", *self.new_packages,
               env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if self.made_run_munge:
            shutil.rmtree("/run/munge", ignore_errors=True)
        shutil.rmtree(self.state, ignore_errors=True)
        left = sorted(installed_packages() - self.before)
        if left:
            raise SystemExit(f"slurm-check: packages left installed: {' '.join(left)}")
        if "slurm-client" not in self.before and shutil.which("sinfo"):
            raise SystemExit("slurm-check: sinfo is still installed")
        say("machine left as found: no new packages, no daemons, no slurm.conf")


def prepare(work: Path) -> Path:
    """Raw files and the configuration both runs use (same data_dir, same bytes)."""
    sys.path.insert(0, str(REPO))
    from tests.helpers import find_locomo  # the tests' way to get the real file
    from memobench.tools.generate.longmemeval import write_longmemeval

    data = work / "data"
    data.mkdir(parents=True)
    locomo, how = find_locomo()
    if locomo is None:
        raise SystemExit(f"slurm-check: {how}")
    shutil.copy(locomo, data / "locomo10.json")
    lme = data / "lme_small.json"
    write_longmemeval(lme, n_questions=40, sessions_per_question=20, seed=13, spice=True)
    cfg = {
        "data_dir": str(data),
        "run": ["locomo10", "lme_small"],
        "datasets": {
            "locomo10": {"variants": ["v0.8.0"]},
            "lme_small": {"format": "longmemeval", "family": "s", "file": str(lme), "bytes": lme.stat().st_size,
                          "segments": 2, "variants": ["v0.8.0"]},
        },
    }
    path = work / "config.yaml"
    path.write_text(json.dumps(cfg, indent=1))  # JSON is YAML
    return path


def snakemake_cmd(workdir: Path, cfg: Path, *args) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir),
            "--configfile", str(cfg), *args]


def outputs(root: Path) -> dict[str, Path]:
    res = root / "results"
    return {str(p.relative_to(res)): p for p in res.rglob("*")
            # logs and the shared retrieval's internal cache (its keys hold file stamps) excepted
            if p.is_file() and not {"logs", "cache"} & set(p.relative_to(res).parts)}


def run_both(work: Path, cfg: Path):
    local = work / "local"
    slurm = work / "slurm"
    local_cmd = snakemake_cmd(local, cfg, "--cores", "1", "--workflow-profile", "none")
    slurm_cmd = snakemake_cmd(
        slurm, cfg,
        "--workflow-profile", str(REPO / "workflow/profiles/slurm"),
        "--profile", str(REPO / "workflow/profiles/sites/no-accounting"),
        # this check's own pace (not a site setting): poll every few seconds
        "--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2")
    say("running the workflow locally and through Slurm side by side")
    t = time.monotonic()
    with open(work / "local.log", "w") as lf, open(work / "slurm.log", "w") as sf:
        lp = subprocess.Popen(local_cmd, stdout=lf, stderr=subprocess.STDOUT)
        sp = subprocess.Popen(slurm_cmd, stdout=sf, stderr=subprocess.STDOUT)
        src, lrc = sp.wait(), lp.wait()
    say(f"both runs done in {time.monotonic() - t:.1f}s (local rc {lrc}, slurm rc {src})")
    for name, rc in (("local", lrc), ("slurm", src)):
        if rc != 0:
            raise SystemExit(f"slurm-check: the {name} run failed ({rc}):\n"
                             + (work / f"{name}.log").read_text()[-4000:])
    return local, slurm


def check_submissions(slurm_log: str) -> int:
    """The jobs really went through sbatch into partition main and completed."""
    jobs = sh("squeue", "-h", "-t", "all", "-o", "%i|%P|%T|%j").stdout.split()
    submitted = slurm_log.count("has been submitted with SLURM jobid")
    done = [j for j in jobs if j.split("|")[1:3] == ["main", "COMPLETED"]]
    if submitted == 0 or len(done) != submitted or len(jobs) != submitted:
        raise SystemExit(f"slurm-check: {submitted} submissions in the log, squeue shows {jobs}")
    return submitted


def compare(local: Path, slurm: Path) -> int:
    a, b = outputs(local), outputs(slurm)
    if set(a) != set(b):
        raise SystemExit(f"slurm-check: different outputs: only local {sorted(set(a) - set(b))}, "
                         f"only slurm {sorted(set(b) - set(a))}")
    differ = [k for k in sorted(a) if not filecmp.cmp(a[k], b[k], shallow=False)]
    if differ:
        raise SystemExit(f"slurm-check: outputs differ between the local and the Slurm run: {differ}")
    for must in ("report.md", "locomo10/v0.8.0/metrics.json", "lme_small/v0.8.0/segments/seg2.parquet"):
        if must not in a:
            raise SystemExit(f"slurm-check: results/{must} missing")
    return len(a)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-unsupported", action="store_true",
                    help="exit 0 (after one line) when not root or not on Debian")
    args = ap.parse_args(argv)
    skip = args.skip_unsupported or os.environ.get("MEMOBENCH_SLURM_CHECK") == "skip"
    why = unsupported_reason()
    if why:
        print(f"slurm-check: skipped: {why} (it needs root on Debian)" if skip
              else f"slurm-check: cannot run: {why} (it needs root on Debian; --skip-unsupported to skip)")
        return 0 if skip else 1
    cluster = Cluster()
    work = Path(tempfile.mkdtemp(prefix="memobench-slurm-work-"))
    ok = False
    try:
        cfg = prepare(work)
        cluster.install()
        cluster.start()
        local, slurm = run_both(work, cfg)
        n_jobs = check_submissions((work / "slurm.log").read_text())
        n_files = compare(local, slurm)
        say(f"OK: {n_jobs} sbatch jobs completed in partition main; {n_files} output files byte-identical "
            "to the local run")
        ok = True
    finally:
        try:
            cluster.stop()
        finally:
            if ok:
                shutil.rmtree(work, ignore_errors=True)
            else:
                print(f"slurm-check: kept {work} for inspection", file=sys.stderr)
    # The trap: snakemake starts must be quick again (printed, not asserted: timings vary).
    t = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        sh(*snakemake_cmd(Path(d), REPO / ".test/config/config.yaml", "-n", "-q", "--workflow-profile", "none"),
           check=False)
    say(f"a plain `snakemake -n` afterwards takes {time.monotonic() - t:.1f}s; total {time.monotonic() - T0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
