/* Unit tests of supervisor/limits/cgroup_procs.c: when /proc/cgroups says
 * cgroup v2 cannot serve memory, pids or cpu, gadgetd run makes its
 * sandbox shell before its limits are set up (core.c); where v2 may serve
 * one of them the limiter may move gadgetd and its children, and the shell
 * must come after it. */
#include "limits/cgroup.h"
#include "tap.h"

#define HEAD "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"

static void test_tables(void)
{
        CHECK(!cgroup_v2_may_serve_in(HEAD "cpuset\t3\t11\t1\ncpu\t1\t11\t1\ncpuacct\t2\t11\t1\n"
                                      "memory\t4\t185\t1\npids\t8\t11\t1\nhugetlb\t0\t5\t1\n"),
              "all three in v1 hierarchies (a hybrid host's hugetlb on v2): v2 serves none");
        CHECK(cgroup_v2_may_serve_in(HEAD "cpuset\t0\t80\t1\ncpu\t0\t80\t1\nmemory\t0\t80\t1\npids\t0\t80\t1\n"),
              "a unified host: every controller in hierarchy 0");
        CHECK(cgroup_v2_may_serve_in(HEAD "cpu\t1\t11\t1\nmemory\t4\t185\t1\npids\t0\t11\t1\n"),
              "pids left to v2: it may serve it");
        CHECK(!cgroup_v2_may_serve_in(HEAD "cpu\t1\t11\t1\nmemory\t0\t1\t0\npids\t8\t11\t1\n"),
              "memory disabled (cgroup_disable=memory), the others v1: v2 serves none");
        CHECK(cgroup_v2_may_serve_in(HEAD "cpu\t1\t11\t1\nmemory\t4\t185\t1\n"),
              "pids missing from the table: it may be v2's");
        CHECK(cgroup_v2_may_serve_in(HEAD "cpuacct\t2\t11\t1\nmemory\t4\t1\t1\npids\t8\t1\t1\n"),
              "cpuacct is not cpu: v2 may serve cpu");
        CHECK(cgroup_v2_may_serve_in(""), "no table: it may");
}

int main(void)
{
        test_tables();
        return tap_done();
}
