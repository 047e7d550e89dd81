"""What the tests of gadget bundles share (releases_test.py, and
backup_pg_test.py's deploy with its state on PostgreSQL): a bundle's
directory for gadgetctl bundle. No tests are registered here."""
import os
import shutil

from harness import TESTGADGET

# The kv binding of the versions whose state a deploy keeps.
KV = "[Binding KV]\nType=kv\n"


def bundle_dir(tmp, version, name="rel", keys=""):
    """A bundle's directory: manifest, policy template, the program."""
    d = os.path.join(tmp, "src-%s-%s" % (name, version))
    os.makedirs(os.path.join(d, "bin"), exist_ok=True)
    with open(os.path.join(d, "manifest"), "w") as f:
        f.write("Name=%s\nVersion=%s\nProtocol=2\nSDK=test\n" % (name, version))
    with open(os.path.join(d, "policy"), "w") as f:
        f.write("[Gadget]\nName=%s\nExec=bin/testgadget\n%s" % (name, keys))
    shutil.copy(TESTGADGET, os.path.join(d, "bin", "testgadget"))
    os.chmod(os.path.join(d, "bin", "testgadget"), 0o755)
    return d
