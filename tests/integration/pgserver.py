"""A throwaway PostgreSQL server for the store tests (Store=postgresql).

Debian's postgresql package (15, or a later one: found by glob) is run as
`nobody` (initdb refuses root) on a data directory in the test's temporary
directory, with no TCP listener (listen_addresses='') and its Unix socket
in that directory; fsync and synchronous_commit are on, so what the server
reported committed survives its crash. PgServer.conninfo is what gadgetd's
StoreConnection= gets. The cluster is a copy of a template made by initdb
once per build tree and PostgreSQL version (BUILD/pg-template-N, made
under a lock: tests run in parallel), not an initdb per test. Missing PostgreSQL is a part scripts/deps installs:
need() skips the test on a developer's machine and fails it under CI.
PgStandby is a streaming standby of a running PgServer (pg_basebackup),
for the store's failover test."""
import fcntl
import glob
import contextlib
import os
import pwd
import shutil
import subprocess
import time

from parts import need

USER = "nobody"


def pg_bin():
    """The newest /usr/lib/postgresql/N/bin holding initdb, or None."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    found.sort(key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(found[-1]) if found else None


class PgServer:
    """start() makes the cluster (once) and starts the server; stop() ends
    it (fast, then killed); also restart, psql, terminate_backends."""

    def __init__(self, tmp, name="pg", wrap=(), listen=None, settings="", port=5432):
        """wrap: the command line the server runs under (the fault tests'
        network namespace); listen: an address it listens on over TCP too
        (trusting its /24), which conninfo then names instead of the
        socket's directory (psql here still uses the socket); settings:
        lines for postgresql.conf; port: its port (and its socket's)."""
        self.wrap = list(wrap)
        self.listen = listen
        self.settings = settings
        self.port = port
        self.bin = pg_bin()
        if not self.bin or not shutil.which("setpriv"):
            need("postgresql", "the PostgreSQL store tests start their own server (initdb, pg_ctl)")
        self.dir = os.path.join(tmp, name)
        self.data = os.path.join(self.dir, "data")
        self.logfile = os.path.join(self.dir, "server.log")
        self.pw = pwd.getpwnam(USER)
        self.conninfo = "host=%s port=%d dbname=postgres user=gadgetd" % (self.dir, port)
        if listen:
            self.conninfo = "host=%s port=%d dbname=postgres user=gadgetd connect_timeout=2" % (listen, port)
        self.made = False

    def _as_user(self, *cmd, check=True, capture=False, timeout=120, cwd=None):
        env = dict(os.environ, LC_ALL="C", PGHOST=self.dir, PGPORT=str(self.port), PGUSER="gadgetd",
                   PGDATABASE="postgres")
        env.pop("PGPASSWORD", None)
        return subprocess.run(
            [*self.wrap, "setpriv", "--reuid=%d" % self.pw.pw_uid, "--regid=%d" % self.pw.pw_gid, "--clear-groups",
             *cmd],
            check=check, cwd=cwd or self.dir, env=env, timeout=timeout, text=True,
            stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
            stderr=subprocess.PIPE if capture else subprocess.DEVNULL)

    def _initdb(self, parent, data):
        os.makedirs(parent, exist_ok=True)
        # The test's directory is 0755 and root's; this one is the server's.
        os.chown(parent, self.pw.pw_uid, self.pw.pw_gid)
        os.chmod(parent, 0o755)
        r = self._as_user(os.path.join(self.bin, "initdb"), "-D", data, "-U", "gadgetd", "--auth=trust",
                          "--no-sync", "-E", "UTF8", "--locale=C", cwd=parent)
        return r

    def _template(self):
        """The data directory initdb made once for this build tree and
        version (made here under a lock if it is not there yet), or None
        where no build tree is known (initdb per test then)."""
        gadgetd = os.environ.get("GADGETD", "")
        if not gadgetd:
            return None
        version = self.bin.rstrip("/").split("/")[-2]
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(gadgetd))), "pg-template-" + version)
        data = os.path.join(path, "data")
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.exists(os.path.join(data, "PG_VERSION")):
                new = path + ".new"
                shutil.rmtree(new, ignore_errors=True)
                self._initdb(new, os.path.join(new, "data"))
                shutil.rmtree(path, ignore_errors=True)
                os.rename(new, path)
        return data

    def _make(self):
        template = self._template()
        if template:
            os.makedirs(self.dir, exist_ok=True)
            os.chown(self.dir, self.pw.pw_uid, self.pw.pw_gid)
            os.chmod(self.dir, 0o755)
            subprocess.run(["cp", "-a", template, self.data], check=True)
        else:
            self._initdb(self.dir, self.data)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("listen_addresses = ''\nunix_socket_directories = '%s'\nfsync = on\nport = %d\n"
                    "synchronous_commit = on\nshared_buffers = 16MB\nmax_connections = 40\n" % (self.dir, self.port))
            if self.listen:
                f.write("listen_addresses = '%s'\n" % self.listen)
            f.write(self.settings)
        if self.listen:
            with open(os.path.join(self.data, "pg_hba.conf"), "a") as f:
                f.write("host all all %s.0/24 trust\n" % self.listen.rsplit(".", 1)[0])
        self.made = True

    def pg_ctl(self, *args, check=True, timeout=120):
        return self._as_user(os.path.join(self.bin, "pg_ctl"), "-D", self.data, *args, check=check,
                             timeout=timeout)

    def start(self):
        if not self.made:
            self._make()
        self.pg_ctl("-l", self.logfile, "-w", "-t", "60", "start")
        return self

    def stop(self, mode="fast"):
        """Stops the server; if it does not stop, kills the postmaster."""
        if self.pg_ctl("-m", mode, "-w", "-t", "30", "stop", check=False).returncode == 0:
            return
        pidfile = os.path.join(self.data, "postmaster.pid")
        if os.path.exists(pidfile):
            with open(pidfile) as f:
                pid = int(f.readline())
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            time.sleep(0.5)

    def restart(self, mode="fast"):
        self.pg_ctl("-m", mode, "-w", "-t", "60", "-l", self.logfile, "restart")

    def psql(self, sql):
        """Runs sql (unaligned, tuples only); its output."""
        r = self._as_user(os.path.join(self.bin, "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql,
                          capture=True)
        return r.stdout.strip()

    @contextlib.contextmanager
    def locked(self, table):
        """Holds an ACCESS EXCLUSIVE lock on table while the block runs (a
        psql session that took it, and commits when the block ends)."""
        env = dict(os.environ, LC_ALL="C", PGHOST=self.dir, PGPORT=str(self.port), PGUSER="gadgetd",
                   PGDATABASE="postgres")
        p = subprocess.Popen(["setpriv", "--reuid=%d" % self.pw.pw_uid, "--regid=%d" % self.pw.pw_gid, "--clear-groups",
                              os.path.join(self.bin, "psql"), "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=self.dir, env=env, text=True)
        try:
            p.stdin.write("BEGIN;\nLOCK TABLE %s IN ACCESS EXCLUSIVE MODE;\nSELECT 'locked';\n" % table)
            p.stdin.flush()
            if p.stdout.readline().strip() != "locked":
                raise RuntimeError("psql could not lock %s" % table)
            yield
        finally:
            p.stdin.write("COMMIT;\n")
            p.stdin.close()
            p.wait(timeout=60)

    def terminate_backends(self, app_prefix="gadgetd", exact=None):
        """Ends the sessions of every gadgetd (pg_terminate_backend), or the
        one whose application_name is exact ("gadgetd NODE": its kv
        session; "gadgetd NODE lease": its leases); how many."""
        where = "= '%s'" % exact if exact else "LIKE '%s%%'" % app_prefix
        return int(self.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                             " WHERE application_name " + where) or 0)

    def pids(self):
        """The postmaster and its children."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            pm = int(f.readline())
        kids = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open("/proc/%s/stat" % d) as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == pm:
                            kids.append(int(d))
                except (OSError, IndexError, ValueError):
                    pass
        return [pm] + kids

    def child(self, kind):
        """The pid of the server's process whose title names kind
        ("walsender": the one streaming to a standby), or None."""
        for pid in self.pids()[1:]:
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    if kind.encode() in f.read():
                        return pid
            except OSError:
                pass
        return None

    def signal_all(self, sig):
        """Sends sig to the postmaster and its children (SIGSTOP: a server
        that hangs)."""
        for pid in self.pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def server_log(self):
        try:
            with open(self.logfile) as f:
                return f.read()
        except OSError:
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class PgStandby(PgServer):
    """A hot standby of primary (a started PgServer): a base backup of it
    (pg_basebackup, WAL streamed) whose server streams from it as
    application_name name, its own socket in its directory. Its
    synchronous_standby_names is empty: promoted, it has no standby of its
    own to wait for. promote() makes it the primary; walreceiver() is the
    pid that receives the primary's WAL (SIGSTOP: a standby that lags)."""

    def __init__(self, tmp, primary, name="standby", app="standby", **server):
        """name: its directory below tmp; app: its application_name (what
        the primary's synchronous_standby_names names); server: PgServer's
        wrap, listen, port."""
        super().__init__(tmp, name=name, **server)
        self.primary = primary
        self.name = app

    def _make(self):
        os.makedirs(self.dir, exist_ok=True)
        os.chown(self.dir, self.pw.pw_uid, self.pw.pw_gid)
        os.chmod(self.dir, 0o755)
        self._as_user(os.path.join(self.bin, "pg_basebackup"), "-D", self.data, "-h", self.primary.dir,
                      "-p", str(self.primary.port), "-U", "gadgetd", "-X", "stream", "-c", "fast", "--no-sync")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("\nunix_socket_directories = '%s'\nport = %d\nsynchronous_standby_names = ''\nhot_standby = on\n"
                    "wal_retrieve_retry_interval = '100ms'\n"
                    "primary_conninfo = 'host=%s port=%d user=gadgetd application_name=%s'\n"
                    % (self.dir, self.port, self.primary.dir, self.primary.port, self.name))
        open(os.path.join(self.data, "standby.signal"), "w").close()
        os.chown(os.path.join(self.data, "standby.signal"), self.pw.pw_uid, self.pw.pw_gid)
        self.made = True

    def streaming(self):
        """The primary's word on this standby: "sync", "async" (or "potential"), "" while it does not stream."""
        return self.primary.psql("SELECT sync_state FROM pg_stat_replication WHERE application_name = '%s'"
                                 " AND state = 'streaming'" % self.name)

    def promote(self):
        self.pg_ctl("-w", "-t", "60", "promote")

