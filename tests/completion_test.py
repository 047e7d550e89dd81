"""The bash completion offers every command gadgetctl has: the commands
of `gadgetctl --help` against what _gadgetctl completes after
"gadgetctl ", by bash itself, with the built gadgetctl first on PATH (the
completion reads gadgetctl's help); and what each command takes, read from
its own --help: "--always" after "gadgetctl approve 1 --", "--runtime"
after "gadgetctl load FILE --", the folders after "gadgetctl dev ", the gadgets
after "gadgetctl COMMAND " for every command whose usage starts with NAME
(the gadget list stubbed: no gadgetd runs here); the versions after
"gadgetctl deploy NAME " (stubbed too); rollback's --with-state. GADGETCTL and
SOURCE_ROOT from meson."""
import os
import re
import subprocess
import sys
import tempfile

GADGETCTL = os.environ["GADGETCTL"]
COMPLETION = os.path.join(os.environ["SOURCE_ROOT"], "packaging", "bash-completion", "gadgetctl")


def complete(*words, cwd=None):
    line = " ".join(("gadgetctl",) + words)
    script = ('source "$1"; _gadgetctl_gadgets() { echo stub-gadget; }; '
              'COMP_WORDS=(%s); COMP_CWORD=%d; _gadgetctl; printf "%%s\\n" "${COMPREPLY[@]}"'
              % (" ".join("'%s'" % w for w in ("gadgetctl",) + words), len(words)))
    r = subprocess.run(["/bin/bash", "-c", script, "bash", COMPLETION], capture_output=True, text=True,
                       env=dict(os.environ, PATH=os.path.dirname(os.path.abspath(GADGETCTL)),
                                GADGETD_SOCKET="/nonexistent/control.sock"), cwd=cwd)
    return set(filter(None, r.stdout.split("\n"))), line


def usage(command):
    """The usage line of `gadgetctl COMMAND --help`."""
    out = subprocess.run([GADGETCTL, command, "--help"], capture_output=True, text=True).stdout
    return out.split("\n", 1)[0]


def main():
    out = subprocess.run([GADGETCTL, "--help"], capture_output=True, text=True).stdout
    section = out.split("Commands:", 1)[1].split("\n\n", 1)[0]
    commands = set(re.findall(r"^  ([a-z]+)\b", section, re.M))
    got, line = complete("")
    bad = 0
    if not commands or commands - got:
        print("FAIL: %r completes %s, without %s" % (line, sorted(got), sorted(commands - got)))
        bad = 1
    extra = got - commands
    if extra:
        print("FAIL: %r completes commands gadgetctl has not: %s" % (line, sorted(extra)))
        bad = 1
    got, line = complete("approve", "1", "--")
    if "--always" not in got:
        print("FAIL: %r completes %s, without --always" % (line, sorted(got)))
        bad = 1
    # Long options without a short one ("      --runtime" lines) too.
    got, line = complete("load", "x.policy", "--")
    if not {"--runtime", "--no-block"} <= got:
        print("FAIL: %r completes %s, without --runtime and --no-block" % (line, sorted(got)))
        bad = 1
    # A DIR (gadgetctl dev): folders, not files.
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "gadget"))
        open(os.path.join(tmp, "notes.txt"), "w").close()
        dirs = [c for c in sorted(commands) if re.search(r"\] %s DIR\b" % c, usage(c))]
        for c in dirs:
            got, line = complete(c, "", cwd=tmp)
            if got != {"gadget"}:
                print("FAIL: %r completes %s, not the folders" % (line, sorted(got)))
                bad = 1
        if not dirs:
            print("FAIL: no command takes a DIR by its usage line (gadgetctl dev DIR)")
            bad = 1
    named = [c for c in sorted(commands) if re.search(r"\] %s NAME\b" % c, usage(c))]
    for c in named:
        got, line = complete(c, "")
        if got != {"stub-gadget"}:
            print("FAIL: %r completes %s, not the gadgets" % (line, sorted(got)))
            bad = 1
    # Long options with a value ("      --percent P"): offered, and their
    # value is not taken for an argument.
    got, line = complete("deploy", "stub-gadget", "--")
    if not {"--percent", "--max-errors", "--min-calls"} <= got:
        print("FAIL: %r completes %s, without deploy's long options" % (line, sorted(got)))
        bad = 1
    got, line = complete("rollback", "stub-gadget", "--")
    if "--with-state" not in got:
        print("FAIL: %r completes %s, without rollback's --with-state" % (line, sorted(got)))
        bad = 1
    script = ('source "$1"; _gadgetctl_gadgets() { echo stub-gadget; }; '
              '_gadgetctl_versions() { echo 1.0; }; '
              'COMP_WORDS=(gadgetctl deploy stub-gadget --percent ""); COMP_CWORD=4; _gadgetctl; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    r = subprocess.run(["/bin/bash", "-c", script, "bash", COMPLETION], capture_output=True, text=True,
                       env=dict(os.environ, PATH=os.path.dirname(os.path.abspath(GADGETCTL))))
    if set(filter(None, r.stdout.split("\n"))):
        print("FAIL: 'gadgetctl deploy stub-gadget --percent ' completes %r, a version for a percent" % r.stdout)
        bad = 1
    # A VERSION (gadgetctl deploy NAME VERSION): the gadget's versions.
    script = ('source "$1"; _gadgetctl_gadgets() { echo stub-gadget; }; '
              '_gadgetctl_versions() { [ "${*: -1}" = stub-gadget ] && echo 1.0 && echo 2.0; }; '
              'COMP_WORDS=(gadgetctl deploy stub-gadget ""); COMP_CWORD=3; _gadgetctl; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    r = subprocess.run(["/bin/bash", "-c", script, "bash", COMPLETION], capture_output=True, text=True,
                       env=dict(os.environ, PATH=os.path.dirname(os.path.abspath(GADGETCTL))))
    if set(filter(None, r.stdout.split("\n"))) != {"1.0", "2.0"}:
        print("FAIL: 'gadgetctl deploy stub-gadget ' completes %r, not its versions" % r.stdout)
        bad = 1
    if len(named) < 8:
        print("FAIL: only %s take a NAME first, by their usage lines" % named)
        bad = 1
    print("%d commands, %s" % (len(commands), "FAILED" if bad else "all completed"))
    return bad


if __name__ == "__main__":
    sys.exit(main())
