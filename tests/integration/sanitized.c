/* sanitized: a program with one deliberate fault per argument, for the
 * test that checks sanitizer reports are not lost (sanitizer_test.py):
 * "ub" overflows a signed int, "heap" writes past a heap block. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
        if (argc > 1 && strcmp(argv[1], "ub") == 0) {
                volatile int x = INT_MAX;
                x += argc;
                printf("%d\n", x);
        } else if (argc > 1 && strcmp(argv[1], "heap") == 0) {
                char *p = malloc(4);
                memset(p, 1, 16 + (size_t)argc);
                printf("%d\n", p[1]);
                free(p);
        }
        return 1; /* the status gadgetd run and gadgetctl use for "failed" */
}
