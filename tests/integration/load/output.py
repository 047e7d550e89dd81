"""A gadget's output and log, and its start: a
`yes`-like flood of stdout, log messages of 4,096 newlines each over the
RPC, one pipe read of more than a thousand lines, and a gadget that never
says hello. Each is charged to the gadget: its log budget
(LogLinesPerSecond=, LogBytesPerSecond=; the excess is dropped and counted
in one "N lines dropped" line per second) and StartTimeout=.

Reproduce an attack by hand: a policy with Exec=hostile (the build's
tests/integration/hostile) and Arguments=yes, Arguments=log-newlines,
Arguments=burst or Arguments=no-hello, loaded beside a healthy gadget."""
import os
import re
import subprocess
import time

from harness import Daemon, GADGETD, Healthy, check, cpu_s, fd_count, policy, rss_kib, spare, test, wait_for

HOSTILE = os.environ.get("HOSTILE", "")
ATTACK_S = 4          # how long each flood runs while the healthy gadget is called
LINES, BYTES = 100, 64 * 1024  # the default log budget per second
READ_FACTOR = 4       # gadgetd reads at most this times BYTES a second of a gadget's pipes
# gadgetd's CPU time a stdout flood may add, as a share of one CPU. With
# the budget it adds about nothing: gadgetd reads at most 4 x
# LogBytesPerSecond a second and logs at most LogLinesPerSecond lines;
# without it, gadgetd spent a whole CPU reading and logging every line.
CPU_SHARE_MAX = 0.25
# fds gadgetd holds for one running gadget (pidfd, report pipe, RPC socket,
# two output pipes, cgroup files, a spare shell refilled): the attacker's own.
FD_PER_GADGET = 12
RSS_SLACK_KIB = 4 * 1024  # RSS gadgetd may gain during and keep after an attack (measured: under 0.5 MiB)
# ASan keeps freed memory in quarantine on purpose: there RSS says nothing
# (leaks are LeakSanitizer's to find, at gadgetd's exit).
RSS_CHECKED = os.environ.get("SANITIZE", "none") in ("", "none")




def log_size(d):
    d.log.flush()
    return os.path.getsize(d.log.name)


def flood_growth(d, size0):
    """Bytes gadgetd's log grew by since size0, but the audit records of
    the healthy gadget's calls (one per gadgetctl call: the caller's cost,
    not the flood's)."""
    d.log.flush()
    with open(d.log.name, "rb") as f:
        f.seek(size0)
        return sum(len(l) for l in f if b"[good] audit " not in l)


def dropped_lines(text, name):
    """The counts of gadgetd's "[NAME] ... N lines dropped" lines."""
    return [int(m) for m in re.findall(r"\[%s\] warning: (\d+) lines dropped" % re.escape(name), text)]


def dropped_bytes(text, name):
    """The bytes of gadgetd's "[NAME] ... N lines dropped (M bytes)" lines."""
    return sum(int(m) for m in re.findall(r"\[%s\] warning: \d+ lines dropped \((\d+) bytes\)" %
                                          re.escape(name), text))


def start_good(d):
    """Starts the healthy gadget; returns gadgetd's fds and RSS then, counted
    with the spare sandbox shell in place (its fds come and go with it)."""
    policy(d.pol, "good")
    check(d.ctl("reload").returncode == 0, "reload failed")
    wait_for(lambda: d.state("good") == "ready", what="good ready")
    wait_for(lambda: spare(d), what="a spare shell")
    return fd_count(d.proc.pid), rss_kib(d.proc.pid)


def fds_back(d, bound):
    wait_for(lambda: spare(d) and fd_count(d.proc.pid) <= bound, what="gadgetd's fds back to %d" % bound)


def flood(d, mode, extra=""):
    """Starts the hostile gadget "flood" in mode; it says hello first."""
    policy(d.pol, "flood", "Arguments=%s\n%s" % (mode, extra), exec_path=HOSTILE)
    check(d.ctl("reload").returncode == 0, "reload failed")
    wait_for(lambda: d.state("flood") == "ready", what="flood ready")


def bounded_flood(tmp, mode):
    """Runs the flood of mode for ATTACK_S while the healthy gadget is
    called; checks gadgetd's log growth, fds and RSS, and that both logs
    say what was dropped; also what gadgetd read of the flood (at most
    READ_FACTOR x LogBytesPerSecond a second) and its CPU time during the
    flood beyond that of the same time with the healthy caller alone."""
    with Daemon(tmp) as d:
        pid = d.proc.pid
        fds0, rss0 = start_good(d)
        with Healthy(d, "good", "echo", '"hi"'):
            cpu0, t0 = cpu_s(pid), time.monotonic()
            time.sleep(ATTACK_S / 2)
            base = (cpu_s(pid) - cpu0) / (time.monotonic() - t0)
            size0, cpu0, t0 = log_size(d), cpu_s(pid), time.monotonic()
            flood(d, mode)
            time.sleep(ATTACK_S)
            check(fd_count(pid) <= fds0 + FD_PER_GADGET, "fds grew from %d to %d" % (fds0, fd_count(pid)))
            check(not RSS_CHECKED or rss_kib(pid) <= rss0 + RSS_SLACK_KIB,
                  "RSS grew from %d to %d KiB" % (rss0, rss_kib(pid)))
            cpu, wall = cpu_s(pid) - cpu0, time.monotonic() - t0
            fds1, rss1 = fd_count(pid), rss_kib(pid)
            grown = flood_growth(d, size0)
            check(d.ctl("stop", "flood").returncode == 0, "stop failed")
        # The log budget bounds what reached gadgetd's log: LINES lines a
        # second of at most 2 KiB each (these are short), plus one line a
        # second about the drops and a few about the start and stop.
        seconds = wall + 1
        check(grown <= seconds * (LINES * 200 + 4096), "gadgetd's log grew %d bytes in %.1f s" % (grown, wall))
        extra = cpu / wall - base
        text = d.logtext()
        check(extra <= CPU_SHARE_MAX, "the flood cost gadgetd %.0f%% of a CPU" % (100 * extra))
        read = dropped_bytes(text, "flood")
        check(read <= (wall + 2) * READ_FACTOR * BYTES, "gadgetd read %d bytes of the flood in %.1f s" %
              (read, wall))
        counts = dropped_lines(text, "flood")
        check(counts and sum(counts) > LINES, "no \"N lines dropped\" line in gadgetd's log")
        logs = d.ctl("logs", "flood", "-o", "cat").stdout
        check(re.search(r"^gadgetd: \d+ lines dropped", logs, re.M), "no drop line in the gadget's log")
        fds_back(d, fds0)
        check(not RSS_CHECKED or rss_kib(pid) <= rss0 + RSS_SLACK_KIB,
              "RSS stayed at %d KiB (from %d)" % (rss_kib(pid), rss0))
        print("%s: gadgetd CPU %.0f%% of the flood's %.1f s (%.0f%% beyond the healthy calls' own), log +%d "
              "bytes, %d lines dropped, fds %d -> %d, RSS %d -> %d KiB" %
              (mode, 100 * cpu / wall, wall, 100 * extra, grown, sum(counts), fds0, fds1, rss0, rss1))


@test
def load_output_yes_flood(tmp):
    bounded_flood(tmp, "yes")


@test
def load_output_log_newline_frames(tmp):
    """Log messages of 4,096 newlines each: the lines over the budget are
    counted in bulk, not one call each, and the messages' bytes count
    against the same read allowance as the pipes': past it the gadget's RPC
    socket waits for the next window, so gadgetd's CPU is bounded too."""
    bounded_flood(tmp, "log-newlines")


@test
def load_output_one_read_of_many_lines(tmp):
    """5,000 numbered lines ("1" to "5000") in one write: one read of
    gadgetd holds well over a thousand of them (more than its ring). The first LINES reach
    the log in order, the rest are counted as dropped — none is logged as
    "(null)" and none is lost without a word."""
    with Daemon(tmp) as d:
        policy(d.pol, "flood", "Arguments=burst 5000\nLogLinesPerSecond=2000\nLogBytesPerSecond=1M\n",
               exec_path=HOSTILE)
        d.ctl("reload")
        wait_for(lambda: d.state("flood") == "ready", what="flood ready")
        # The last line logged, or the line about the drops.
        wait_for(lambda: dropped_lines(d.logtext(), "flood") or "[flood] 5000\n" in d.logtext(),
                 what="the end of the burst")
        text = d.logtext()
        check("(null)" not in text, "a line was logged as (null)")
        got = re.findall(r"\[flood\] (\d+)$", text, re.M)
        check(got == [str(i) for i in range(1, 2001)], "logged lines: %d, first %r, last %r" %
              (len(got), got[:3], got[-3:]))
        check(dropped_lines(text, "flood") == [3000], "drops: %r" % dropped_lines(text, "flood"))
        # Its lifecycle lines (started, ready) may come among the burst's.
        logs = [l for l in d.ctl("logs", "flood", "-o", "cat").stdout.splitlines()
                if not re.match(r"gadgetd: (started|ready)\b", l)]
        check(logs[-1].startswith("gadgetd: 3000 lines dropped") and logs[-2] == "2000",
              "the gadget's log ends %r" % logs[-2:])


@test
def load_output_start_timeout(tmp):
    """A gadget that never says hello fails after StartTimeout= with that
    cause, and Restart= applies: with on-failure it is restarted (three
    starts awaited), with no it stays failed. A call to it meanwhile waits
    for its hello and is answered with the start's failure cause; each
    timeout is an audit record."""
    with Daemon(tmp) as d:
        fds0, _ = start_good(d)
        with Healthy(d, "good", "echo", '"hi"'):
            policy(d.pol, "mute", "Arguments=no-hello\nStartTimeout=500ms\nRestart=on-failure\n",
                   exec_path=HOSTILE)
            d.ctl("reload")
            check(d.state("mute") == "starting", "not starting: %r" % d.state("mute"))
            r = d.ctl("call", "mute", "echo")
            check(r.returncode != 0 and 'gadget "mute" did not start: start timeout' in r.stderr,
                  "call while starting: %r" % r.stderr)
            wait_for(lambda: len(re.findall(r"\[mute\] started", d.logtext())) >= 3, what="two restarts")
            policy(d.pol, "mute", "Arguments=no-hello\nStartTimeout=500ms\n", exec_path=HOSTILE)
            d.ctl("reload")
            wait_for(lambda: d.state("mute") == "failed", what="mute failed")
        st = d.list()["mute"]
        check("StartTimeout" in st.get("cause", ""), "cause: %r" % st)
        check("StartTimeout=500ms" in d.ctl("status", "mute").stdout, "status does not show StartTimeout")
        audit = d.ctl("audit", "mute").stdout
        check(audit.count('"op":"StartTimeout"') >= 3, "not one audit record per timeout: %r" % audit[-500:])
        check(re.search(r"\[mute\] .*start timeout: no hello within StartTimeout=500ms", d.logtext()),
              "gadgetd's log does not say why")
        # One more: the audit log, opened at the first record (the timeout's).
        fds_back(d, fds0 + 1)


@test
def load_output_budget_settings(tmp):
    """The daemon's LogLinesPerSecond=/LogBytesPerSecond= are the budget of
    a gadget whose policy sets none; a policy's own wins. A bad value stops
    gadgetd at its start."""
    conf = os.path.join(tmp, "gadgetd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nLogLinesPerSecond=7\nLogBytesPerSecond=1K\n")
    with Daemon(tmp, extra=["--config", conf]) as d:
        policy(d.pol, "flood", "Arguments=burst 5000\n", exec_path=HOSTILE)
        policy(d.pol, "own", "LogLinesPerSecond=50\nLogBytesPerSecond=2K\n")
        d.ctl("reload")
        wait_for(lambda: dropped_lines(d.logtext(), "flood"), what="the drop line")
        check("LogLinesPerSecond=7, LogBytesPerSecond=1024" in d.ctl("status", "flood").stdout,
              "the daemon's budget is not the gadget's")
        check("LogLinesPerSecond=50, LogBytesPerSecond=2048" in d.ctl("status", "own").stdout,
              "the policy's budget does not win")
        text = d.logtext()
        check(re.findall(r"\[flood\] (\d+)$", text, re.M) == [str(i) for i in range(1, 8)],
              "not the first 7 lines kept")
        check(dropped_lines(text, "flood") == [4993], "drops: %r" % dropped_lines(text, "flood"))
    with open(conf, "a") as f:
        f.write("LogLinesPerSecond=0\n")
    r = subprocess.run([GADGETD, "--config", conf], capture_output=True, text=True, timeout=10)
    check(r.returncode != 0 and "%s:4:" % conf in r.stderr, "LogLinesPerSecond=0 accepted: %r" % r.stderr)
