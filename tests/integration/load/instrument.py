"""The instrument itself: the healthy caller must turn a test red when
its calls are not answered, or the whole suite could not fail."""
import time

from harness import Daemon, Failure, Healthy, check, policy, test, wait_for

# No RSS bound of gadgetd here (tests/integration/load_test.py --rss).
RSS_BOUND = False


@test
def load_healthy_caller_sees_failures(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "slow", "CallTimeout=300ms\nRestart=always\n")
        check(d.ctl("reload").returncode == 0, "reload failed")
        wait_for(lambda: d.state("slow") == "ready", what="slow ready")
        failed = False
        try:
            with Healthy(d, "slow", "hang"):
                time.sleep(1)  # the first call times out after 300 ms
        except Failure:
            failed = True
        check(failed, "the healthy caller did not notice calls that timed out")
