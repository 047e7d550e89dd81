/* buildtree: the build tree a program runs from (buildtree.h). */
#include "buildtree.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

bool buildtree_path(const char *self_rel, const char *other_rel, char *out, size_t len)
{
        char self[PATH_MAX], marker[PATH_MAX + 32];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        size_t rel = strlen(self_rel);
        struct stat st;
        if (n <= 0)
                return false;
        self[n] = '\0';
        if ((size_t)n <= rel + 1 || strcmp(self + n - rel, self_rel) != 0 || self[n - rel - 1] != '/')
                return false;
        self[n - rel - 1] = '\0'; /* the build tree's root */
        snprintf(marker, sizeof marker, "%s/meson-private", self);
        if (stat(marker, &st) < 0 || !S_ISDIR(st.st_mode))
                return false;
        return (size_t)snprintf(out, len, "%s/%s", self, other_rel) < len;
}
