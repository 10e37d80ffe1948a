"""The host agent: what chaoskraft runs on a host it reaches over SSH, as root.

    python3 -B -c "<this file>" COMMAND [ARGS]      (sent over SSH, never stored on the host)

It is standard library only and runs on Python 3.7 or newer, because it runs on the
host's own python3; the node does not (it runs in the bundle, below).

Everything chaoskraft puts on a host lives under one directory (``DIR``,
/opt/chaoskraft unless the hosts file says otherwise):

    DIR/bundle.id       which node bundle is unpacked (the node image's hash)
    DIR/root/           the node bundle: the node image's file system, run with chroot
    DIR/supervisor.pid  the supervisor's pid while it runs

The node runs in ``DIR/root`` with chroot, in the host's own network and
process namespaces: iptables rules it is given are the host's, its pid is a
host pid (kill and pause reach it as they reach any process), its data is on
the host's disk. /proc and /dev are bind-mounted into the root while it runs
(libfaketime, iptables and faultfs's FUSE need them).

Commands (each prints one JSON object on its last line):
    status              the installed bundle id, whether the supervisor runs
    install ID          unpack the bundle tar read from stdin as DIR/root (replacing
                        another bundle); nothing else on the host changes
    prepare             stop what runs, wipe the node's data, logs and configuration,
                        mount /proc and /dev, copy the host's resolv.conf and hosts
    start               start the supervisor, detached from the SSH session
    stop                stop the supervisor and every process in the root, remove the
                        fault rules (iptables chains ck-*), unmount everything under DIR
    clean               stop, then remove DIR: the host is as it was
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

DIR = os.environ.get("CHAOSKRAFT_HOST_DIR", "/opt/chaoskraft")
ROOT = os.path.join(DIR, "root")
BUNDLE_ID = os.path.join(DIR, "bundle.id")
PID = os.path.join(DIR, "supervisor.pid")
NODE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONPATH": "/opt/chaoskraft:/opt/chaoskraft/vendor",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "CHAOSKRAFT_NO_SSHD": "1",  # the host has its own sshd
    "LANG": "C.UTF-8",
}
# The node's writable state inside the root: wiped before every run.
STATE = ("var/lib/chaoskraft", "var/log/chaoskraft", "etc/chaoskraft", "run/chaoskraft")
MOUNTS = (("proc", ["-t", "proc", "proc"]), ("dev", ["--bind", "/dev"]))


def _out(**kw):
    print(json.dumps(kw))


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _supervisor_pid():
    pid = _read(PID)
    if not pid:
        return None
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return None
    return int(pid)


def _mounts_under(path):
    """Mount points at or under ``path``, deepest first."""
    found = []
    with open("/proc/self/mounts") as f:
        for line in f:
            point = line.split()[1].replace("\\040", " ")
            if point == path or point.startswith(path.rstrip("/") + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def _processes_in_root():
    """Pids of the processes whose root directory is ROOT (the node, faultfs, the
    supervisor, anything the nemesis started there)."""
    real = os.path.realpath(ROOT)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/root" % entry) == real:
                pids.append(int(entry))
        except OSError:
            pass
    return pids


def status():
    _out(bundle=_read(BUNDLE_ID), running=_supervisor_pid() is not None, dir=DIR,
         mounts=_mounts_under(DIR))


def install(bundle_id):
    stop(quiet=True)
    os.makedirs(DIR, mode=0o755, exist_ok=True)
    new = ROOT + ".new"
    shutil.rmtree(new, ignore_errors=True)
    os.makedirs(new)
    p = subprocess.run(["tar", "-x", "-p", "--numeric-owner", "-f", "-", "-C", new],
                       stdin=sys.stdin.buffer, stderr=subprocess.PIPE)
    if p.returncode != 0:
        shutil.rmtree(new, ignore_errors=True)
        sys.stderr.write("tar -x into %s failed: %s\n" % (new, p.stderr.decode(errors="replace")))
        sys.exit(3)
    if os.path.exists(ROOT):
        shutil.rmtree(ROOT)
    os.rename(new, ROOT)
    with open(BUNDLE_ID, "w") as f:
        f.write(bundle_id + "\n")
    _out(installed=bundle_id)


def prepare():
    stop(quiet=True)
    if not os.path.isdir(ROOT):
        sys.stderr.write("no node bundle in %s: install first\n" % ROOT)
        sys.exit(3)
    for rel in STATE:
        path = os.path.join(ROOT, rel)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
    for name in ("resolv.conf", "hosts"):
        try:
            shutil.copyfile("/etc/" + name, os.path.join(ROOT, "etc", name))
        except OSError:
            pass
    for point, args in MOUNTS:
        target = os.path.join(ROOT, point)
        os.makedirs(target, exist_ok=True)
        subprocess.run(["mount"] + args + [target], check=True)
    _out(prepared=True)


def start():
    if _supervisor_pid() is not None:
        _out(started=_supervisor_pid(), already=True)
        return
    log = open(os.path.join(ROOT, "var/log/chaoskraft/supervisor.out"), "ab")
    # A new session: the supervisor outlives the SSH session that started it.
    p = subprocess.Popen(["chroot", ROOT, "python3", "-m", "node_image.supervisor", "run"],
                         env=NODE_ENV, cwd="/", stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True)
    with open(PID, "w") as f:
        f.write("%d\n" % p.pid)
    _out(started=p.pid)


def _iptables_clean():
    """Remove the fault packages' chains (ck-*) and the rules that jump to them."""
    if not os.path.exists(os.path.join(ROOT, "usr/sbin/iptables")):
        return
    for table in ("filter", "mangle", "raw", "nat"):
        p = subprocess.run(["chroot", ROOT, "iptables", "-t", table, "-S"], env=NODE_ENV,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if p.returncode != 0:
            continue
        lines = p.stdout.decode().splitlines()
        for line in lines:
            parts = line.split()
            if parts[:1] == ["-A"] and "-j" in parts and parts[parts.index("-j") + 1].startswith("ck-") \
                    and not parts[1].startswith("ck-"):
                subprocess.run(["chroot", ROOT, "iptables", "-t", table, "-D"] + parts[1:],
                               env=NODE_ENV, stderr=subprocess.DEVNULL)
        for line in lines:
            parts = line.split()
            if parts[:1] == ["-N"] and parts[1].startswith("ck-"):
                subprocess.run(["chroot", ROOT, "iptables", "-t", table, "-F", parts[1]],
                               env=NODE_ENV, stderr=subprocess.DEVNULL)
                subprocess.run(["chroot", ROOT, "iptables", "-t", table, "-X", parts[1]],
                               env=NODE_ENV, stderr=subprocess.DEVNULL)


def stop(quiet=False):
    pid = _supervisor_pid()
    if pid is not None:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)  # it stops the node and unmounts faultfs
        deadline = time.monotonic() + 20
        while _supervisor_pid() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
    if os.path.isdir(ROOT):
        for _ in range(50):
            pids = _processes_in_root()
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        _iptables_clean()
    for point in _mounts_under(DIR):
        subprocess.run(["umount", "-l", point], stderr=subprocess.DEVNULL)
    left = _mounts_under(DIR)
    if os.path.exists(PID):
        os.remove(PID)
    if not quiet:
        _out(stopped=pid, mounts_left=left)


def clean():
    stop(quiet=True)
    left = _mounts_under(DIR)
    if left:
        sys.stderr.write("still mounted under %s: %s; not removing it\n" % (DIR, ", ".join(left)))
        sys.exit(3)
    existed = os.path.exists(DIR)
    shutil.rmtree(DIR, ignore_errors=False) if existed else None
    _out(removed=DIR if existed else None)


COMMANDS = {"status": status, "install": install, "prepare": prepare, "start": start,
            "stop": stop, "clean": clean}


def main(argv):
    if not argv or argv[0] not in COMMANDS:
        sys.stderr.write("usage: host_agent %s [ARGS]\n" % "|".join(COMMANDS))
        return 2
    if os.geteuid() != 0:
        sys.stderr.write("the host agent must run as root\n")
        return 2
    COMMANDS[argv[0]](*argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
