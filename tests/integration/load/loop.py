"""A gadget against the loop through its own peer: big valid frames (each
turn handles a bounded part of them), binding calls beyond its budgets
("busy" at once), and a caller that queues more calls than the callee can
answer within CallTimeout (the calls fail; the callee is not restarted
while it makes progress, a hung one still is)."""
import os
import re
import subprocess
import time

from harness import CALLFLOOD, Daemon, Healthy, check, fd_count, fd_links, policy, rss_kib, sanitized, spare, test, unload, wait_for

HOSTILE = os.environ.get("HOSTILE", "")

# gadgetd's own growth allowed while an attack runs (a sandbox holds about
# 5 fds: an attacker, the callee it floods, restarting, and its pre-warmed
# next sandbox, with room), and after it ends; the sanitizer build keeps
# freed memory in quarantine.
FDS_DURING, FDS_AFTER = 24, 2
# Under ASan, whose quarantine keeps freed memory resident, RSS bounds
# are not checked (harness.sanitized); they hold for the normal build.
RSS_DURING_KIB = 48 * 1024
RSS_AFTER_KIB = 16 * 1024


class Bounds:
    """gadgetd's fds and RSS against the baseline taken at the start."""

    def __init__(self, d):
        # The spare sandbox shell's fds are part of the baseline.
        wait_for(lambda: spare(d), what="the spare shell")
        time.sleep(0.2)
        self.d, self.pid = d, d.proc.pid
        self.fds, self.rss = fd_count(self.pid), rss_kib(self.pid)
        self.max_fds, self.max_rss = self.fds, self.rss

    def sample(self):
        self.max_fds = max(self.max_fds, fd_count(self.pid))
        self.max_rss = max(self.max_rss, rss_kib(self.pid))

    def check_during(self):
        check(self.max_fds <= self.fds + FDS_DURING, "fds grew from %d to %d" % (self.fds, self.max_fds))
        check(sanitized(self.pid) or self.max_rss <= self.rss + RSS_DURING_KIB,
              "RSS grew from %d to %d KiB" % (self.rss, self.max_rss))

    def check_after(self):
        end = time.time() + 10
        while fd_count(self.pid) > self.fds + FDS_AFTER and time.time() < end:
            time.sleep(0.1)
        if fd_count(self.pid) > self.fds + FDS_AFTER:
            # Named only on failure, and fds closed while they are named
            # left out (the last CI run's error on a passing check).
            check(False, "fds not back near %s: %s %r" % (self.d.list(), self.fds, sorted(fd_links(self.pid))))
        rss = rss_kib(self.pid)
        print("gadgetd fds %d, at most %d, after %d; RSS %d KiB, at most %d, after %d" % (
            self.fds, self.max_fds, fd_count(self.pid), self.rss, self.max_rss, rss))
        check(sanitized(self.pid) or rss <= self.rss + RSS_AFTER_KIB,
              "RSS after the attack %d KiB, before %d KiB" % (rss, self.rss))


def ready(d, *names):
    check(d.ctl("reload").returncode == 0, "reload failed")
    for n in names:
        wait_for(lambda: d.state(n) == "ready", what=n + " ready")




def answers(d, gadget, mode):
    """The attacker's count of its answers by code, from gadgetd's log:
    big-frames' "answers N ok N busy N denied N timeout N other N", or
    binding-flood's "sent N answered N ok N error CODE N ..."."""
    if mode == "binding-flood":
        line = wait_for(lambda: re.search(r"\[%s\] binding-flood: sent \d+ answered (\d+) ok (\d+)((?: error \d+ \d+)*)"
                                          % gadget, d.logtext()), timeout=40, what=mode + "'s answers")
        codes = dict((int(c), int(n)) for c, n in re.findall(r"error (\d+) (\d+)", line.group(3)))
        got = {"answers": int(line.group(1)), "ok": int(line.group(2)), "busy": codes.pop(7, 0),
               "denied": codes.pop(4, 0), "timeout": codes.pop(6, 0)}
        got["other"] = sum(codes.values())
        return got
    line = wait_for(lambda: re.search(r"\[%s\] " % gadget + mode + r": answers (\d+) ok (\d+) busy (\d+) denied (\d+) timeout (\d+) "
                                      r"other (\d+)", d.logtext()), timeout=40, what=mode + "'s answers")
    return dict(zip(("answers", "ok", "busy", "denied", "timeout", "other"), map(int, line.groups())))


def run_attack(d, bounds, done):
    """Samples the bounds until done() holds (180 s: in the emulated guest
    a big-frames attack took longer than 45 s)."""
    end = time.time() + 180
    while not done() and time.time() < end:
        bounds.sample()
        time.sleep(0.05)
    check(done(), "the attack did not finish")


# (gadget, hostile big-frames arguments, policy keys, the turn's bound):
# many frames in each read, bounded by TurnFramesMax=, by TurnBytesMax=
# (frames of about 430 bytes), by FrameValuesMax= (frames of about 1,004
# values).
TURN_ATTACKS = [
    ("small", "20000 1", "", lambda f, b, v: f == 64 and v < 64 * 10),
    ("bytes", "3000 100", "TurnBytesMax=4K\nTurnFramesMax=4096\n", lambda f, b, v: 4096 <= b < 4096 + 500 and f < 20),
    ("values", "1000 1000", "FrameValuesMax=5000\n", lambda f, b, v: f in (5, 6) and 5000 <= v < 6000),  # 6: with the hello
]


@test
def load_loop_frames_per_second(tmp):
    """A gadget resending big frames as fast as it can: gadgetd decodes at
    most FrameValuesPerSecond= of their values a second (262144 here: two
    frames of 131,000), one budget at once and one frame past it, so its
    13 frames take at least (13 x 131,000 - 262,144 - 131,000) / 262,144 =
    5.0 s to be handled (4.9: the clock's rounding; a slower host only
    makes it longer; without the budget they took under one),
    every one answered, gadgetd says so once, and a healthy gadget's calls
    are answered throughout."""
    with Daemon(tmp) as d:
        policy(d.pol, "good")
        ready(d, "good")
        with Healthy(d, "good", "echo"):
            t0 = time.monotonic()
            policy(d.pol, "resend", "Arguments=big-frames 13 131000\nFrameValuesPerSecond=262144\n",
                   exec_path=HOSTILE)
            check(d.ctl("reload").returncode == 0, "reload")
            wait_for(lambda: "[resend] big-frames: answers" in d.logtext(), timeout=120, what="resend's answers")
            took = time.monotonic() - t0
            got = answers(d, "resend", "big-frames")
            check(got["answers"] == 13 and got["denied"] == 13, "resend's answers: %r" % got)
            check(took >= 4.9, "13 frames of 131,000 values handled in %.1f s, under the 5.0 s the budget "
                  "allows at least" % took)
            check(d.logtext().count("(FrameValuesPerSecond=262144): the rest wait for the next second") == 1,
                  "said once")


@test
def load_loop_big_frames(tmp):
    """Frames written 1 MiB at a time (a read of gadgetd's holds up to
    thousands): each turn handles a bounded part. Then 150 valid
    frames of 131,000 values (the most FrameValuesMax allows by default,
    about 11 ms of gadgetd's CPU each), then one frame over FrameValuesMax."""
    with Daemon(tmp) as d:
        policy(d.pol, "good")
        ready(d, "good")
        bounds = Bounds(d)
        with Healthy(d, "good", "echo"):
            # Each attacker's turns end at the budget it hits first.
            for name, args, keys, bound in TURN_ATTACKS:
                policy(d.pol, name, "Arguments=big-frames %s\n%s" % (args, keys), exec_path=HOSTILE)
                ready(d)
                run_attack(d, bounds, lambda: "[%s] big-frames: answers" % name in d.logtext())
                got = answers(d, name, "big-frames")
                # Its own calls get their errors (the binding is not declared).
                n = int(args.split()[0])
                check(got["answers"] == n and got["denied"] == n, "%s's answers: %r" % (name, got))
                turn = re.search(r"\[%s\] handled (\d+) frames, (\d+) bytes, (\d+) values in one loop turn "
                                 r"\(TurnFramesMax=\d+, TurnBytesMax=\d+, FrameValuesMax=\d+\): the rest wait "
                                 r"for the next turn" % name, d.logtext())
                check(turn, "no word of %s's frames waiting for the next turn:\n%s" % (name, d.logtext()[-2000:]))
                frames, nbytes, values = map(int, turn.groups())
                check(bound(frames, nbytes, values), "%s: a turn of %d frames, %d bytes, %d values" % (
                    name, frames, nbytes, values))
                unload(d, name)
            # The per-turn budget and the arena (the per-second budget has
            # a test of its own: load_loop_frames_per_second).
            policy(d.pol, "big", "Arguments=big-frames 150 131000\nFrameValuesPerSecond=1073741824\n",
                   exec_path=HOSTILE)
            ready(d)
            run_attack(d, bounds, lambda: "[big] big-frames: answers" in d.logtext())
            got = answers(d, "big", "big-frames")
            check(got["answers"] == 150 and got["denied"] == 150, "attacker's answers: %r" % got)
            unload(d, "big")
            # One frame over FrameValuesMax ends the worker before unpacking.
            policy(d.pol, "over", "Arguments=big-frames 1 200000\n", exec_path=HOSTILE)
            ready(d)
            wait_for(lambda: "a frame of more than FrameValuesMax=131072 values" in d.logtext(),
                     what="the frame over FrameValuesMax refused")
            wait_for(lambda: d.state("over") == "failed", what="over ended")
            check(d.list()["over"]["cause"] == "protocol violation", "cause: %r" % d.list()["over"])
            bounds.sample()
        bounds.check_during()
        bounds.check_after()


@test
def load_loop_binding_flood(tmp):
    """1,000 binding calls at once to a gadget binding whose target hangs:
    CallsMax= of the binding (16 by default) go through, the rest are
    answered busy at once; then BindingCallsMax= bounds all bindings."""
    with Daemon(tmp) as d:
        policy(d.pol, "good")
        policy(d.pol, "slowpoke", "CallTimeout=3s\nRestart=always\n")
        ready(d, "good", "slowpoke")
        bounds = Bounds(d)
        slow = "[Binding SLOW]\nType=gadget\nTarget=slowpoke\n"
        with Healthy(d, "good", "echo"):
            policy(d.pol, "flood", "Arguments=binding-flood SLOW call 1000 hang\n" + slow, exec_path=HOSTILE)
            ready(d)
            got = answers(d, "flood", "binding-flood")
            # The 16 that reached slowpoke end when its CallTimeout does.
            check(got["busy"] == 1000 - 16 and got["answers"] == 1000 and got["ok"] == 0,
                  "CallsMax=16: answers %r" % got)
            check(d.list()["slowpoke"]["calls"] == 16, "calls that reached slowpoke: %r" % d.list()["slowpoke"])
            check("busy: 16 calls of binding SLOW in flight (CallsMax=16): answering busy" in d.logtext(),
                  "the first busy answer not logged")
            # When its calls end (slowpoke hangs: CallTimeout), the count.
            wait_for(lambda: "984 binding calls answered busy" in d.logtext(), timeout=15,
                     what="the count of busy answers in the log")
            bounds.sample()
            unload(d, "flood")
            policy(d.pol, "flood2", "Arguments=binding-flood SLOW call 1000 hang\nBindingCallsMax=8\n" +
                   slow.replace("Target=slowpoke\n", "Target=slowpoke\nCallsMax=100\n"), exec_path=HOSTILE)
            wait_for(lambda: d.state("slowpoke") == "ready", timeout=15, what="slowpoke ready again")
            ready(d, "flood2")
            got = answers(d, "flood2", "binding-flood")
            bounds.sample()
            check("busy: 8 binding calls in flight (BindingCallsMax=8): answering busy" in d.logtext(),
                  "BindingCallsMax not logged")
            check(got["busy"] == 1000 - 8 and got["answers"] == 1000 and got["ok"] == 0,
                  "BindingCallsMax=8: answers %r" % got)
            unload(d, "flood2")
        bounds.check_during()
        bounds.check_after()


@test
def load_loop_queued_calls(tmp):
    """A caller queues 1,024 calls of 5 ms each on a gadget whose
    CallTimeout is 1 s: the later calls time out, and the gadget, which
    keeps answering, is not restarted. A gadget that answers nothing for
    CallTimeout still is."""
    with Daemon(tmp) as d:
        policy(d.pol, "good")
        policy(d.pol, "worker", "CallTimeout=1s\nRestart=always\n")
        policy(d.pol, "hanger", "CallTimeout=1s\nRestart=always\n")
        ready(d, "good", "worker", "hanger")
        bounds = Bounds(d)
        pid = d.list()["worker"]["pid"]
        with Healthy(d, "good", "echo"):
            r = subprocess.run([CALLFLOOD, d.sock, "worker", "sleep", "1024", '{"ms": 5}'],
                               capture_output=True, text=True, timeout=60)
            got = dict((" ".join(l.split()[:-1]), int(l.split()[-1])) for l in r.stdout.splitlines())
            bounds.sample()
            check(got.get("ok", 0) > 0 and got.get("error 6", 0) > 0 and got.get("unanswered") == 0,
                  "the queued calls: %r" % got)
            check(d.list()["worker"]["pid"] == pid and d.list()["worker"]["restarts"] == 0 and
                  d.state("worker") == "ready", "worker restarted: %r" % d.list()["worker"])
            # The calls read after their deadline are answered "not run" at
            # once (gadget.proto Call.deadline_us): on a slow host that
            # burst of audit records may use the gadget's audit budget
            # before the first CallTimeout record, which is then only
            # counted ("summarized"), as every record past the budget is.
            wait_for(lambda: re.search(r"CallTimeout.*not restarted: a call was answered \d+ ms ago|"
                                       r'"binding":"limit","op":"CallTimeout","outcome":"denied".*"summarized":\d+',
                                       d.logtext()),
                     timeout=10, what="the log to say why the worker was not restarted")
            # While it still works through the timed-out calls, a new call
            # waits behind them and may time out: still no restart.
            d.ctl("call", "worker", "echo", "1")
            check(d.list()["worker"]["pid"] == pid, "worker restarted by a later call")
            hpid = d.list()["hanger"]["pid"]
            r = d.ctl("call", "hanger", "hang")
            check(r.returncode == 1 and "CallTimeout" in r.stderr, "hang: %r" % r.stderr)
            wait_for(lambda: d.state("hanger") == "ready" and d.list()["hanger"]["pid"] != hpid,
                     what="the hung gadget restarted")
            wait_for(lambda: re.search(r"CallTimeout.*no call answered for \d+ ms: killed", d.logtext()),
                     timeout=10, what="the log to say why the hanger was restarted")
            bounds.sample()
        bounds.check_during()
        bounds.check_after()
